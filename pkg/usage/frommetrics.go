package usage

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseMetrics rebuilds a Snapshot from the usage metrics a daemon
// serves (the Prometheus text of its /metrics), for dri-cdi top reading
// them through the API server where it cannot read the node. Busy
// fractions are -1: they need two snapshots (see Busy). Processes are not
// in the metrics and stay empty.
func ParseMetrics(r io.Reader) (*Snapshot, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	snap := &Snapshot{}
	if f := families[MetricPrefix+"last_scan_timestamp_seconds"]; f != nil && len(f.GetMetric()) == 1 {
		sec := f.GetMetric()[0].GetGauge().GetValue()
		snap.Time = time.Unix(0, int64(sec*1e9))
	} else {
		return nil, fmt.Errorf("parse metrics: no %slast_scan_timestamp_seconds: is usage on (--usage)?", MetricPrefix)
	}
	if f := families[MetricPrefix+"scans_total"]; f != nil && len(f.GetMetric()) == 1 {
		snap.Stats.Scans = int(f.GetMetric()[0].GetCounter().GetValue())
	}
	if f := families[MetricPrefix+"processes"]; f != nil && len(f.GetMetric()) == 1 {
		snap.Stats.Processes = int(f.GetMetric()[0].GetGauge().GetValue())
	}
	if f := families[MetricPrefix+"unreadable_processes"]; f != nil && len(f.GetMetric()) == 1 {
		snap.Stats.Unreadable = int(f.GetMetric()[0].GetGauge().GetValue())
	}
	type key struct{ card, driver, ns, pod, ctr string }
	rows := map[key]*ContainerUsage{}
	row := func(l map[string]string) *ContainerUsage {
		k := key{l["card"], l["driver"], l["namespace"], l["pod"], l["container"]}
		u := rows[k]
		if u == nil {
			u = &ContainerUsage{Names: Names{Namespace: k.ns, Pod: k.pod, Container: k.ctr}}
			u.Host = k.ns == HostLabel
			u.Named = !u.Host && k.ns != UnknownLabel
			rows[k] = u
		}
		return u
	}
	engine := func(u *ContainerUsage, class string) *EngineUsage {
		for i := range u.Engines {
			if u.Engines[i].Class == class {
				return &u.Engines[i]
			}
		}
		u.Engines = append(u.Engines, EngineUsage{Class: class, Busy: -1})
		return &u.Engines[len(u.Engines)-1]
	}
	each := func(name string, f func(l map[string]string, v float64)) {
		for _, m := range families[MetricPrefix+name].GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			f(l, metricValue(m))
		}
	}
	each("clients", func(l map[string]string, v float64) { row(l).Clients = int(v) })
	each("idle_seconds", func(l map[string]string, v float64) { row(l).IdleSeconds = v })
	each("idle", func(l map[string]string, v float64) { row(l).Idle = v == 1 })
	each("engine_busy_seconds_total", func(l map[string]string, v float64) {
		e := engine(row(l), l["engine"])
		e.BusySeconds, e.HasBusy = v, true
	})
	each("engine_maxfreq_seconds_total", func(l map[string]string, v float64) {
		e := engine(row(l), l["engine"])
		e.MaxFreqSeconds, e.HasMaxFreq = v, true
	})
	each("memory_bytes", func(l map[string]string, v float64) {
		u := row(l)
		u.Memory = append(u.Memory, MemoryUsage{Region: l["region"], Kind: l["kind"], Bytes: uint64(v)})
	})
	claimsFromMetrics(each, row)
	cards := map[string]*CardUsage{}
	for k, u := range rows {
		c := cards[k.card]
		if c == nil {
			c = &CardUsage{ID: k.card, Driver: k.driver}
			cards[k.card] = c
		}
		slices.SortFunc(u.Engines, func(a, b EngineUsage) int { return slices.Index(Classes, a.Class) - slices.Index(Classes, b.Class) })
		slices.SortFunc(u.Memory, func(a, b MemoryUsage) int { return strings.Compare(a.Region+"\x00"+a.Kind, b.Region+"\x00"+b.Kind) })
		slices.SortFunc(u.Claims, func(a, b Claim) int {
			return strings.Compare(a.Namespace+"/"+a.Name+"/"+a.ShareID, b.Namespace+"/"+b.Name+"/"+b.ShareID)
		})
		c.Users = append(c.Users, *u)
	}
	for _, c := range cards {
		slices.SortFunc(c.Users, func(a, b ContainerUsage) int {
			return strings.Compare(a.Namespace+"/"+a.Pod+"/"+a.Container, b.Namespace+"/"+b.Pod+"/"+b.Container)
		})
		snap.Cards = append(snap.Cards, *c)
	}
	slices.SortFunc(snap.Cards, func(a, b CardUsage) int { return strings.Compare(a.ID, b.ID) })
	return snap, nil
}

// claimsFromMetrics rebuilds the rows' claims from claim_shares,
// claim_promised_ratio and claim_memory_bytes, inverting Claim.Promised: a ratio of 0 is admin
// access, a share's card shares are its shares over its ratio.
func claimsFromMetrics(each func(string, func(map[string]string, float64)), row func(map[string]string) *ContainerUsage) {
	type key struct{ card, ns, pod, ctr, claimNS, claim, share string }
	keyOf := func(l map[string]string) key {
		return key{l["card"], l["namespace"], l["pod"], l["container"], l["claim_namespace"], l["claim"], l["share_id"]}
	}
	ratios, memory := map[key]float64{}, map[key]int64{}
	each("claim_promised_ratio", func(l map[string]string, v float64) { ratios[keyOf(l)] = v })
	each("claim_memory_bytes", func(l map[string]string, v float64) { memory[keyOf(l)] = int64(v) })
	each("claim_shares", func(l map[string]string, v float64) {
		c := Claim{Card: l["card"], Namespace: l["claim_namespace"], Name: l["claim"], ShareID: l["share_id"], Shares: int64(v),
			Memory: memory[keyOf(l)]}
		r, ok := ratios[keyOf(l)]
		switch {
		case ok && r == 0:
			c.Admin = true
		case ok && c.ShareID != "":
			c.CardShares = int64(math.Round(float64(c.Shares) / r))
		}
		u := row(l)
		u.Claims = append(u.Claims, c)
	})
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// Busy fills cur's busy fractions from the growth of each engine class's
// busy seconds since prev, over the time between their scans. Rows and
// classes prev does not have, and a cur of the same scan as prev, keep -1.
func Busy(prev, cur *Snapshot) {
	if prev == nil || !cur.Time.After(prev.Time) {
		return
	}
	cur.Interval = cur.Time.Sub(prev.Time)
	before := map[string]float64{}
	for _, c := range prev.Cards {
		for _, u := range c.Users {
			for _, e := range u.Engines {
				before[c.ID+"\x00"+u.Namespace+"/"+u.Pod+"/"+u.Container+"\x00"+e.Class] = e.BusySeconds
			}
		}
	}
	for ci := range cur.Cards {
		c := &cur.Cards[ci]
		for ui := range c.Users {
			u := &c.Users[ui]
			for ei := range u.Engines {
				e := &u.Engines[ei]
				if b, ok := before[c.ID+"\x00"+u.Namespace+"/"+u.Pod+"/"+u.Container+"\x00"+e.Class]; ok && e.HasBusy {
					e.Busy = max(e.BusySeconds-b, 0) / cur.Interval.Seconds()
				}
			}
		}
	}
}
