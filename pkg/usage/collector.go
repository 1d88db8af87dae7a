package usage

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricPrefix starts the name of every usage metric.
const MetricPrefix = "dri_cdi_usage_"

// Collector serves a Monitor's last completed scan as Prometheus
// metrics. It reads only the published Snapshot, so a scrape never waits
// for a scan and never sees one half done. A container's series go away
// with the container.
type Collector struct {
	m *Monitor

	busy, maxFreq, memory, clients, idleSeconds, idle *prometheus.Desc
	claimShares, claimPromised, claimMemory           *prometheus.Desc
	scans, scanErrors, unreadable, malformed          *prometheus.Desc
	processes, duration, timestamp                    *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns the metrics of m.
func NewCollector(m *Monitor) *Collector {
	who := []string{"card", "driver", "namespace", "pod", "container"}
	withEngine := append([]string{"card", "driver", "engine"}, who[2:]...)
	withMemory := append([]string{"card", "driver", "region", "kind"}, who[2:]...)
	withClaim := append(slices.Clone(who), "claim_namespace", "claim", "share_id")
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(MetricPrefix+name, help, labels, nil)
	}
	return &Collector{
		m:             m,
		busy:          d("engine_busy_seconds_total", "Busy time of the card's engines of one class for the container's DRM clients, exited clients included (engines of capacity N count 1/N).", withEngine...),
		maxFreq:       d("engine_maxfreq_seconds_total", "drm-cycles over drm-maxfreq: the time the container's work on the engine class would take at the engine's top frequency. Not busy time.", withEngine...),
		memory:        d("memory_bytes", "Memory of the container's open DRM clients on the card, per region and kind (total, shared, resident, purgeable, active).", withMemory...),
		clients:       d("clients", "Open DRM clients (distinct DRM files) of the container on the card.", who...),
		idleSeconds:   d("idle_seconds", "Time since the container last used any engine of the card, or since it was first seen.", who...),
		idle:          d("idle", "1 while the container holds an open client of the card and has used none of its engines for --usage-idle-after, else 0.", who...),
		claimShares:   d("claim_shares", "Shares of the card the container's DRA claim consumed (share_id: its allocation's share ID); 0 for a claim that holds the card whole or with admin access. dri-cdi-dra only.", withClaim...),
		claimPromised: d("claim_promised_ratio", "The part of the card the container's DRA claim was promised, 0 to 1: its shares over the card's shares, 1 for a claim that holds the card whole, 0 with admin access. Compare with rate(dri_cdi_usage_engine_busy_seconds_total[5m]). dri-cdi-dra only.", withClaim...),
		claimMemory:   d("claim_memory_bytes", "Device memory the container's DRA claim consumed of the card's memory capacity (where the card publishes one, a share's amount). Compare with dri_cdi_usage_memory_bytes. dri-cdi-dra only.", withClaim...),
		scans:         d("scans_total", "Completed usage scans."),
		scanErrors:    d("scan_errors_total", "Usage scans that failed (the proc root could not be read)."),
		unreadable:    d("unreadable_processes", "Processes the last scan could not read (missing CAP_SYS_PTRACE, AppArmor, or a process no one may read)."),
		malformed:     d("malformed_lines_total", "drm- lines of fdinfo files that could not be parsed and were skipped."),
		processes:     d("processes", "Processes the last scan looked at."),
		duration:      d("scan_duration_seconds", "Duration of the last completed scan."),
		timestamp:     d("last_scan_timestamp_seconds", "Unix time of the last completed scan."),
	}
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.busy, c.maxFreq, c.memory, c.clients, c.idleSeconds, c.idle, c.claimShares, c.claimPromised, c.claimMemory,
		c.scans, c.scanErrors, c.unreadable, c.malformed, c.processes, c.duration, c.timestamp} {
		ch <- d
	}
}

// Collect sends the figures of the last completed scan.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.scanErrors, prometheus.CounterValue, float64(c.m.failures.Load()))
	s := c.m.Snapshot()
	if s == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.scans, prometheus.CounterValue, float64(s.Stats.Scans))
	ch <- prometheus.MustNewConstMetric(c.unreadable, prometheus.GaugeValue, float64(s.Stats.Unreadable))
	ch <- prometheus.MustNewConstMetric(c.malformed, prometheus.CounterValue, float64(s.Stats.Malformed))
	ch <- prometheus.MustNewConstMetric(c.processes, prometheus.GaugeValue, float64(s.Stats.Processes))
	ch <- prometheus.MustNewConstMetric(c.duration, prometheus.GaugeValue, s.Stats.ScanSeconds)
	ch <- prometheus.MustNewConstMetric(c.timestamp, prometheus.GaugeValue, float64(s.Time.UnixNano())/1e9)
	for _, card := range s.Cards {
		for _, u := range card.Users {
			who := []string{card.ID, card.Driver, u.Namespace, u.Pod, u.Container}
			for _, e := range u.Engines {
				labels := []string{card.ID, card.Driver, e.Class, u.Namespace, u.Pod, u.Container}
				if e.HasBusy {
					ch <- prometheus.MustNewConstMetric(c.busy, prometheus.CounterValue, e.BusySeconds, labels...)
				}
				if e.HasMaxFreq {
					ch <- prometheus.MustNewConstMetric(c.maxFreq, prometheus.CounterValue, e.MaxFreqSeconds, labels...)
				}
			}
			for _, mem := range u.Memory {
				ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(mem.Bytes),
					card.ID, card.Driver, mem.Region, mem.Kind, u.Namespace, u.Pod, u.Container)
			}
			idle := 0.0
			if u.Idle {
				idle = 1
			}
			ch <- prometheus.MustNewConstMetric(c.clients, prometheus.GaugeValue, float64(u.Clients), who...)
			ch <- prometheus.MustNewConstMetric(c.idleSeconds, prometheus.GaugeValue, u.IdleSeconds, who...)
			ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, idle, who...)
			for _, cl := range u.Claims {
				labels := append(slices.Clone(who), cl.Namespace, cl.Name, cl.ShareID)
				ch <- prometheus.MustNewConstMetric(c.claimShares, prometheus.GaugeValue, float64(cl.Shares), labels...)
				if r, ok := cl.Promised(); ok {
					ch <- prometheus.MustNewConstMetric(c.claimPromised, prometheus.GaugeValue, r, labels...)
				}
				if cl.Memory > 0 {
					ch <- prometheus.MustNewConstMetric(c.claimMemory, prometheus.GaugeValue, float64(cl.Memory), labels...)
				}
			}
		}
	}
}
