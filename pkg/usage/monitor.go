package usage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/logging"
)

// Defaults of Options.
const (
	// DefaultInterval is the default time between scans.
	DefaultInterval = 15 * time.Second
	// DefaultIdleAfter is how long a container may hold a card without
	// using any of its engines before it counts as an idle allocation.
	DefaultIdleAfter = 15 * time.Minute
	// hostRetention is how long a series without a liveness source (the
	// host's, or any without a Namer) is kept after its last client.
	hostRetention = time.Hour
	// retireScans is how many scans a client that was not seen stays
	// counted by its own figures before they join the container's base:
	// a process that could not be read once, then again, is not counted
	// twice.
	retireScans = 3
	// cardRefresh bounds how often cards are rediscovered.
	cardRefresh  = 5 * time.Minute
	minCardRetry = 30 * time.Second
)

// Options configure a Monitor.
type Options struct {
	// ProcRoot is the proc tree to read (DefaultProcRoot).
	ProcRoot string
	// Cards lists the node's cards, to name a device by its stable ID;
	// nil names every device by its drm-pdev or numbers.
	Cards func() ([]drm.Card, error)
	// Namer names containers and tells when they are gone; nil leaves
	// them unnamed and drops their figures an hour after their last
	// client.
	Namer Namer
	// IdleAfter is the idle-allocation threshold (DefaultIdleAfter).
	IdleAfter time.Duration
	// Claims, when set, tells the DRA claims through which containers
	// hold their cards; each named container's row then lists its claims
	// of that card (ContainerUsage.Claims).
	Claims ClaimSource
	// Log receives scan errors; nil discards them.
	Log *logrus.Entry
}

// Monitor turns scans of a proc tree into per-container, per-card usage.
// Scan is called from one goroutine (Run); Snapshot from any.
type Monitor struct {
	reader      *Reader
	cardsOf     func() ([]drm.Card, error)
	namer       Namer
	claimSource ClaimSource
	idleAfter   time.Duration
	log         *logrus.Entry
	now         func() time.Time

	mu         sync.Mutex // serializes Scan
	scans      int
	stats      Stats
	lastScan   time.Time
	byNumber   map[[2]uint32]drm.Card
	cardsAt    time.Time
	cardsTried time.Time
	series     map[seriesKey]*series
	// claims is the claim source's last answer; claimsFailing is set
	// while it fails.
	claims        map[Names][]Claim
	claimsFailing bool
	last          atomic.Pointer[Snapshot]
	failures      atomic.Int64
}

// NewMonitor returns a Monitor; it reads nothing until Scan.
func NewMonitor(o Options) *Monitor {
	if o.ProcRoot == "" {
		o.ProcRoot = DefaultProcRoot
	}
	if o.IdleAfter <= 0 {
		o.IdleAfter = DefaultIdleAfter
	}
	if o.Log == nil {
		o.Log = logging.Discard()
	}
	return &Monitor{
		reader: NewReader(o.ProcRoot), cardsOf: o.Cards, namer: o.Namer, claimSource: o.Claims,
		idleAfter: o.IdleAfter, log: o.Log, now: time.Now,
		series: map[seriesKey]*series{},
	}
}

// Snapshot returns the last completed scan, nil before the first.
func (m *Monitor) Snapshot() *Snapshot { return m.last.Load() }

// Run scans every interval until ctx ends. Scans run on this goroutine
// only, off every request path; a failed scan keeps the last snapshot.
func (m *Monitor) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := m.Scan(); err != nil {
			m.log.WithError(err).Warn("usage scan failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type seriesKey struct {
	owner Owner
	card  string
}

type clientKey struct {
	card   string
	id     uint64
	pid    int // with fd, only when the driver gives no drm-client-id
	fd     int
	withID bool
}

type series struct {
	owner    Owner
	card     string
	driver   string
	base     map[string]float64 // class -> busy seconds of clients gone
	baseFreq map[string]float64
	clients  map[clientKey]*client
	created  time.Time
	active   time.Time // last time any busy figure grew
	lastLive time.Time
	prev     map[string]float64 // class -> busy total at the last scan
}

type client struct {
	engines  map[string]*engineState
	info     *FDInfo
	procs    map[int]string
	live     bool
	missed   int
	seenAt   time.Time
	busyPrev map[string]float64 // class -> busy at the previous observation
	fresh    bool               // first observation this scan
}

type engineState struct {
	busyNS     uint64 // largest drm-engine value seen
	capacity   uint64
	cycles     uint64 // largest drm-cycles value seen
	total      uint64 // drm-total-cycles at the last growth step
	cycleBusy  float64
	maxFreqHz  uint64
	hasBusy    bool
	hasCycles  bool
	hasTotal   bool
	hasMaxFreq bool
}

// Scan reads the proc tree once, updates every container's figures and
// publishes a new Snapshot.
func (m *Monitor) Scan() (*Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := m.now()
	res, err := m.reader.Scan()
	if err != nil {
		m.failures.Add(1)
		return nil, fmt.Errorf("scan proc root: %w", err)
	}
	now := m.now()
	m.refreshCards(now, res)

	seen := map[clientKey]*client{}
	obs := res.Observations
	slices.SortFunc(obs, func(a, b Observation) int { return a.PID - b.PID })
	for i := range obs {
		m.observe(&obs[i], seen, now)
	}
	for key, s := range m.series {
		m.retire(s, seen, now)
		if m.gone(s, now) {
			delete(m.series, key)
		}
	}

	for _, e := range res.Errors {
		m.log.WithError(e).Debug("usage: unreadable entry")
	}
	m.scans++
	m.stats.Scans = m.scans
	m.stats.Processes = res.Processes
	m.stats.Unreadable = res.Unreadable
	m.stats.Malformed += res.Malformed
	m.stats.ScanSeconds = m.now().Sub(start).Seconds()
	snap := m.snapshot(now, m.claimsOf())
	m.lastScan = now
	m.last.Store(snap)
	return snap, nil
}

// refreshCards rediscovers the cards at start, periodically, and when a
// device's numbers match no known card (at most every minCardRetry).
func (m *Monitor) refreshCards(now time.Time, res *ScanResult) {
	if m.cardsOf == nil {
		return
	}
	need := m.byNumber == nil || now.Sub(m.cardsAt) > cardRefresh
	if !need && now.Sub(m.cardsTried) > minCardRetry {
		for _, o := range res.Observations {
			if _, ok := m.byNumber[[2]uint32{o.Major, o.Minor}]; !ok && o.Major == MajorDRM {
				need = true
				break
			}
		}
	}
	if !need {
		return
	}
	m.cardsTried = now
	cards, err := m.cardsOf()
	if err != nil {
		m.log.WithError(err).Warn("usage: card discovery failed")
		return
	}
	idx := map[[2]uint32]drm.Card{}
	for _, c := range cards {
		for _, n := range c.DRMNodes() {
			idx[[2]uint32{n.Major, n.Minor}] = c
		}
	}
	m.byNumber, m.cardsAt = idx, now
}

// cardOf names the device of an observation.
func (m *Monitor) cardOf(o *Observation) (id, driver string) {
	if c, ok := m.byNumber[[2]uint32{o.Major, o.Minor}]; ok && o.Major == MajorDRM {
		return c.ID, c.Driver
	}
	if o.Info.PDev != "" {
		return o.Info.PDev, o.Info.Driver
	}
	prefix := ""
	if o.Major == MajorAccel {
		prefix = "accel:"
	}
	return fmt.Sprintf("%s%d:%d", prefix, o.Major, o.Minor), o.Info.Driver
}

func (m *Monitor) observe(o *Observation, seen map[clientKey]*client, now time.Time) {
	card, driver := m.cardOf(o)
	key := clientKey{card: card, id: o.Info.ClientID, withID: o.Info.HasClientID}
	if !key.withID {
		key.pid, key.fd = o.PID, o.FD
	}
	if c := seen[key]; c != nil {
		// Another fd or process of a client already counted: the lowest
		// PID's container owns it; only its process list grows.
		c.procs[o.PID] = o.Comm
		return
	}
	sk := seriesKey{owner: o.Owner, card: card}
	s := m.series[sk]
	if s == nil {
		s = &series{owner: o.Owner, card: card, driver: driver, base: map[string]float64{}, baseFreq: map[string]float64{},
			clients: map[clientKey]*client{}, created: now, active: now, prev: map[string]float64{}}
		m.series[sk] = s
	}
	s.driver = driver
	s.lastLive = now
	c := s.clients[key]
	if c == nil {
		c = &client{engines: map[string]*engineState{}, fresh: true}
		s.clients[key] = c
	} else {
		c.fresh = false
		c.busyPrev = c.busy(driver)
	}
	c.update(o.Info, now)
	c.procs = map[int]string{o.PID: o.Comm}
	c.info, c.live, c.missed = o.Info, true, 0
	seen[key] = c
}

// update merges one fdinfo into the client's engines: counters keep the
// largest value seen (the kernel lets them go back for a while), and
// drm-cycles over drm-total-cycles turns into busy seconds over the wall
// time between observations.
func (c *client) update(info *FDInfo, now time.Time) {
	wall := now.Sub(c.seenAt).Seconds()
	first := c.seenAt.IsZero()
	c.seenAt = now
	for name, e := range info.Engines {
		st := c.engines[name]
		if st == nil {
			st = &engineState{}
			c.engines[name] = st
		}
		st.capacity = max(e.Capacity, 1)
		if e.HasBusyNS {
			st.hasBusy = true
			st.busyNS = max(st.busyNS, e.BusyNS)
		}
		if e.HasMaxFreqHz {
			st.hasMaxFreq, st.maxFreqHz = true, e.MaxFreqHz
		}
		if !e.HasCycles {
			continue
		}
		if e.HasTotalCycles {
			st.hasTotal = true
			if !first && st.hasCycles && e.TotalCycles > st.total && e.Cycles >= st.cycles && wall > 0 {
				frac := float64(e.Cycles-st.cycles) / float64(e.TotalCycles-st.total)
				st.cycleBusy += min(frac, float64(st.capacity)) * wall
			}
			if e.Cycles >= st.cycles || !st.hasCycles {
				st.total = e.TotalCycles
			}
		}
		st.hasCycles = true
		st.cycles = max(st.cycles, e.Cycles)
	}
}

// busy returns the client's busy seconds per class.
func (c *client) busy(driver string) map[string]float64 {
	out := map[string]float64{}
	for name, st := range c.engines {
		class := ClassOf(driver, name)
		switch {
		case st.hasBusy:
			out[class] += float64(st.busyNS) / 1e9 / float64(st.capacity)
		case st.hasTotal:
			out[class] += st.cycleBusy / float64(st.capacity)
		}
	}
	return out
}

// maxFreq returns drm-cycles over drm-maxfreq per class, in seconds.
func (c *client) maxFreq(driver string) map[string]float64 {
	out := map[string]float64{}
	for name, st := range c.engines {
		if st.hasCycles && st.hasMaxFreq && st.maxFreqHz > 0 && !st.hasTotal {
			out[ClassOf(driver, name)] += float64(st.cycles) / float64(st.maxFreqHz) / float64(st.capacity)
		}
	}
	return out
}

// retire marks the clients not seen in this scan; after retireScans their
// figures join the series' base, so the container's counters keep them.
func (m *Monitor) retire(s *series, seen map[clientKey]*client, now time.Time) {
	for key, c := range s.clients {
		if seen[key] == c {
			continue
		}
		c.live = false
		c.missed++
		if c.missed < retireScans {
			continue
		}
		for class, v := range c.busy(s.driver) {
			s.base[class] += v
		}
		for class, v := range c.maxFreq(s.driver) {
			s.baseFreq[class] += v
		}
		delete(s.clients, key)
	}
}

// gone reports a series whose container no longer exists, or, without a
// way to tell, that has had no client for hostRetention.
func (m *Monitor) gone(s *series, now time.Time) bool {
	for _, c := range s.clients {
		if c.live {
			return false
		}
	}
	if m.namer != nil && !s.owner.Host() && s.owner.ContainerID != "" {
		return !m.namer.Alive(s.owner)
	}
	return now.Sub(s.lastLive) > hostRetention
}

func (m *Monitor) snapshot(now time.Time, claims map[Names][]Claim) *Snapshot {
	snap := &Snapshot{Time: now, Stats: m.stats}
	if !m.lastScan.IsZero() {
		snap.Interval = now.Sub(m.lastScan)
	}
	cards := map[string]*CardUsage{}
	for _, s := range m.series {
		cu := cards[s.card]
		if cu == nil {
			cu = &CardUsage{ID: s.card, Driver: s.driver}
			cards[s.card] = cu
		}
		u := m.containerUsage(s, now, snap.Interval)
		if u.Named {
			u.Claims = claimsOfCard(claims[u.Names], s.card)
		}
		cu.Users = append(cu.Users, u)
	}
	for _, cu := range cards {
		slices.SortFunc(cu.Users, func(a, b ContainerUsage) int {
			return strings.Compare(a.Namespace+"/"+a.Pod+"/"+a.Container+"/"+a.ContainerID, b.Namespace+"/"+b.Pod+"/"+b.Container+"/"+b.ContainerID)
		})
		snap.Cards = append(snap.Cards, *cu)
	}
	slices.SortFunc(snap.Cards, func(a, b CardUsage) int { return strings.Compare(a.ID, b.ID) })
	return snap
}

func (m *Monitor) containerUsage(s *series, now time.Time, interval time.Duration) ContainerUsage {
	u := ContainerUsage{Owner: s.owner, Host: s.owner.Host(), Names: Names{Namespace: HostLabel, Pod: HostLabel, Container: HostLabel}}
	if !u.Host {
		if m.namer != nil {
			u.Names, u.Named = m.namer.Name(s.owner)
		}
		if !u.Named {
			u.Names = Names{Namespace: UnknownLabel, Pod: s.owner.PodUID, Container: s.owner.ContainerID}
		}
	}
	busy := maps2(s.base)
	freq := maps2(s.baseFreq)
	delta := map[string]float64{}
	hasBusy, hasFreq := map[string]bool{}, map[string]bool{}
	mem := map[[2]string]uint64{}
	procs := map[int]string{}
	for _, c := range s.clients {
		cb := c.busy(s.driver)
		for class, v := range cb {
			busy[class] += v
			hasBusy[class] = true
			if c.live && !c.fresh {
				delta[class] += max(v-c.busyPrev[class], 0)
			}
		}
		for class, v := range c.maxFreq(s.driver) {
			freq[class] += v
			hasFreq[class] = true
		}
		for name, st := range c.engines {
			class := ClassOf(s.driver, name)
			hasBusy[class] = hasBusy[class] || st.hasBusy || st.hasTotal
		}
		if !c.live {
			continue
		}
		u.Clients++
		for pid, comm := range c.procs {
			procs[pid] = comm
		}
		for region, kinds := range c.info.Memory {
			for kind, v := range kinds {
				mem[[2]string{region, kind}] += v
			}
		}
	}
	grew := false
	for _, class := range Classes {
		b, okB := busy[class]
		f, okF := freq[class]
		if !okB && !okF {
			continue
		}
		if b > s.prev[class] {
			grew = true
		}
		eu := EngineUsage{Class: class, BusySeconds: b, MaxFreqSeconds: f, HasBusy: hasBusy[class], HasMaxFreq: hasFreq[class], Busy: -1}
		if interval > 0 && !s.created.Equal(now) {
			eu.Busy = delta[class] / interval.Seconds()
		}
		u.Engines = append(u.Engines, eu)
		if okF && f > s.prev["maxfreq:"+class] {
			grew = true
		}
		s.prev[class], s.prev["maxfreq:"+class] = b, f
	}
	if grew && !s.created.Equal(now) {
		s.active = now
	}
	u.IdleSeconds = now.Sub(s.active).Seconds()
	u.Idle = u.Clients > 0 && now.Sub(s.active) >= m.idleAfter
	for pid, comm := range procs {
		u.Processes = append(u.Processes, Process{PID: pid, Comm: comm})
	}
	slices.SortFunc(u.Processes, func(a, b Process) int { return a.PID - b.PID })
	for k, v := range mem {
		u.Memory = append(u.Memory, MemoryUsage{Region: k[0], Kind: k[1], Bytes: v})
	}
	slices.SortFunc(u.Memory, func(a, b MemoryUsage) int {
		return strings.Compare(a.Region+"\x00"+a.Kind, b.Region+"\x00"+b.Kind)
	})
	return u
}

func maps2(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
