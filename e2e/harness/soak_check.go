package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dri-cdi/dri-cdi/pkg/alloc"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// The soak's invariants (docs/soak.md), checked against the host and the
// kubelet, never against dri-cdi's own bookkeeping:
//  1. no container starts with a device node of a card not allocated to
//     it: the DRM device numbers in the runtime's OCI spec of the
//     container and in its own /proc/<pid>/root/dev, mapped to cards by
//     the host's sysfs as it was when the container was created, against
//     the kubelet's PodResources (device plugin; its checkpoint for
//     regular init containers, which PodResources leaves out) or the
//     ResourceClaim's allocation (DRA);
//  2. containers that run on through an unbind while another card takes
//     the unbound card's numbers are counted (a known limitation);
//  3. every pod runs within the bound after it was scheduled or the last
//     fault healed (every card is healthy once a fault healed);
//  4. nothing leaks: spec files, sockets, checkpoint entries, and the
//     daemons' fds, goroutines and RSS stay within stated bounds;
//  5. every failure a pod is told is a Warning event on the pod or a
//     container state with a message, never silence.

// Leak bounds of invariant 4, end of the run against its start.
const (
	soakFDSlack        = 20
	soakGoroutineSlack = 50
	soakRSSSlack       = 32 << 20
)

// soakPodRecord follows one soak pod.
type soakPodRecord struct {
	name, kind string
	// ran, failed, late and gone are final states: running at least
	// once, failed for good, reported past the bound, deleted.
	ran, failed, late, gone bool
	scheduled               bool
	// tries counts checks of a container whose allocation was not found.
	tries map[string]int
}

// soakContainerState is a container's state or last state.
type soakContainerState struct {
	Waiting *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"waiting"`
	Running *struct {
		StartedAt time.Time `json:"startedAt"`
	} `json:"running"`
	Terminated *struct {
		Reason      string    `json:"reason"`
		Message     string    `json:"message"`
		ContainerID string    `json:"containerID"`
		StartedAt   time.Time `json:"startedAt"`
	} `json:"terminated"`
}

type soakContainerStatus struct {
	Name        string             `json:"name"`
	ContainerID string             `json:"containerID"`
	State       soakContainerState `json:"state"`
	LastState   soakContainerState `json:"lastState"`
}

// soakPodStatus is the part of a pod the soak reads.
type soakPodStatus struct {
	Metadata struct {
		Name              string     `json:"name"`
		UID               string     `json:"uid"`
		DeletionTimestamp *time.Time `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		ResourceClaims []struct {
			Name              string  `json:"name"`
			ResourceClaimName *string `json:"resourceClaimName"`
		} `json:"resourceClaims"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Reason     string `json:"reason"`
		Message    string `json:"message"`
		Conditions []struct {
			Type               string    `json:"type"`
			Status             string    `json:"status"`
			LastTransitionTime time.Time `json:"lastTransitionTime"`
		} `json:"conditions"`
		InitContainerStatuses []soakContainerStatus `json:"initContainerStatuses"`
		ContainerStatuses     []soakContainerStatus `json:"containerStatuses"`
		ResourceClaimStatuses []struct {
			Name              string  `json:"name"`
			ResourceClaimName *string `json:"resourceClaimName"`
		} `json:"resourceClaimStatuses"`
	} `json:"status"`
}

func (p *soakPodStatus) scheduledAt() time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == "PodScheduled" && c.Status == "True" {
			return c.LastTransitionTime
		}
	}
	return time.Time{}
}

// firstStart is the earliest start of an app container, zero when none
// started.
func (p *soakPodStatus) firstStart() time.Time {
	var first time.Time
	for _, cs := range p.Status.ContainerStatuses {
		for _, t := range []time.Time{runningSince(cs.State), runningSince(cs.LastState)} {
			if !t.IsZero() && (first.IsZero() || t.Before(first)) {
				first = t
			}
		}
	}
	return first
}

func runningSince(st soakContainerState) time.Time {
	switch {
	case st.Running != nil:
		return st.Running.StartedAt
	case st.Terminated != nil:
		return st.Terminated.StartedAt
	}
	return time.Time{}
}

func (p *soakPodStatus) describe() string {
	var parts []string
	parts = append(parts, "phase "+p.Status.Phase)
	for _, cs := range append(slices.Clone(p.Status.InitContainerStatuses), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			parts = append(parts, fmt.Sprintf("%s waiting %s: %s", cs.Name, w.Reason, w.Message))
		}
	}
	return strings.Join(parts, "; ")
}

func (s *Soak) soakPods(ctx context.Context) ([]soakPodStatus, error) {
	var list struct {
		Items []soakPodStatus `json:"items"`
	}
	if err := s.c.GetJSON(ctx, &list, "pods", "-n", "default", "-l", "soak"); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// check is one pass over the soak pods; final checks containers whose
// allocation cannot be found any more as unchecked.
func (s *Soak) check(ctx context.Context, final bool) error {
	pods, err := s.soakPods(ctx)
	if err != nil {
		return err
	}
	a := &soakAlloc{s: s}
	now := time.Now()
	s.mu.Lock()
	active, lastHeal := s.active, s.lastHeal
	seen := map[string]bool{}
	for _, p := range pods {
		seen[p.Metadata.Name] = true
	}
	for name, rec := range s.pods {
		if !seen[name] {
			rec.gone = true
		}
	}
	s.mu.Unlock()
	for i := range pods {
		p := &pods[i]
		s.mu.Lock()
		rec := s.pods[p.Metadata.Name]
		if rec == nil {
			rec = &soakPodRecord{name: p.Metadata.Name}
			s.pods[rec.name] = rec
		}
		s.mu.Unlock()
		for _, cs := range p.Status.InitContainerStatuses {
			s.checkStatus(ctx, p, rec, cs, true, a, final)
		}
		for _, cs := range p.Status.ContainerStatuses {
			s.checkStatus(ctx, p, rec, cs, false, a, final)
		}
		s.checkProgress(p, rec, active, lastHeal, now)
	}
	return nil
}

// checkProgress follows a pod to Running (invariant 3) or to a failure
// with a reason (invariant 5).
func (s *Soak) checkProgress(p *soakPodStatus, rec *soakPodRecord, active string, lastHeal, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheduled := p.scheduledAt()
	rec.scheduled = !scheduled.IsZero()
	if !rec.ran && (p.Status.Phase == "Running" || p.Status.Phase == "Succeeded") {
		if first := p.firstStart(); !first.IsZero() && rec.scheduled {
			from := scheduled
			for _, h := range s.heals() {
				if h.After(from) && h.Before(first) {
					from = h
				}
			}
			rec.ran = true
			s.stats.TimeToRunning = append(s.stats.TimeToRunning, max(first.Sub(from), 0))
		}
	}
	// A pod being deleted ends Failed or Succeeded without a reason: the
	// kubelet's terminal phase, not a failure.
	if p.Status.Phase == "Failed" && !rec.failed && p.Metadata.DeletionTimestamp == nil {
		rec.failed = true
		reason := p.Status.Reason
		if reason == "" && p.Status.Message == "" {
			s.violation("pod %s failed without a reason or message", p.Metadata.Name)
		}
		s.stats.Failed[reason]++
		s.stats.Failures[reason+": "+normalizeMessage(p.Status.Message)]++
	}
	if rec.ran || rec.failed || rec.late || !rec.scheduled || p.Metadata.DeletionTimestamp != nil || active != "" {
		return
	}
	from := scheduled
	if lastHeal.After(from) {
		from = lastHeal
	}
	if now.Sub(from) > s.opts.Bound {
		rec.late = true
		s.violation("pod %s not running %s after it was scheduled or the last fault healed (bound %s): %s",
			p.Metadata.Name, now.Sub(from).Round(time.Second), s.opts.Bound, p.describe())
	}
}

// heals are the times faults healed; s.mu must be held.
func (s *Soak) heals() []time.Time { return s.healed }

// checkStatus records what a container was told (invariant 5) and checks
// each of its containers not checked yet (invariant 1).
func (s *Soak) checkStatus(ctx context.Context, p *soakPodStatus, rec *soakPodRecord, cs soakContainerStatus, init bool, a *soakAlloc, final bool) {
	for _, st := range []soakContainerState{cs.State, cs.LastState} {
		if w := st.Waiting; w != nil && strings.HasSuffix(w.Reason, "Error") {
			s.told(p, cs.Name, w.Reason, w.Message)
		}
		if t := st.Terminated; t != nil && t.Reason == "StartError" {
			s.told(p, cs.Name, t.Reason, t.Message)
		}
	}
	ids := []string{cs.ContainerID}
	if t := cs.LastState.Terminated; t != nil {
		ids = append(ids, t.ContainerID)
	}
	for _, id := range ids {
		_, id, _ = strings.Cut(id, "://")
		s.mu.Lock()
		done := id == "" || s.checked[id]
		s.mu.Unlock()
		if !done {
			s.checkContainer(ctx, p, rec, cs.Name, id, init, a, final)
		}
	}
}

// told records a failure a container was told, once per distinct
// message and container.
func (s *Soak) told(p *soakPodStatus, container, reason, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := p.Metadata.UID + "/" + container + "/" + reason + "/" + message
	if s.checked[key] {
		return
	}
	s.checked[key] = true
	if strings.TrimSpace(message) == "" {
		s.violation("container %s of pod %s: %s without a message", container, p.Metadata.Name, reason)
	}
	s.stats.Failures[reason+": "+normalizeMessage(message)]++
}

var (
	messageIDs  = regexp.MustCompile(`[0-9a-f]{12,}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	messagePods = regexp.MustCompile(`soak-[a-z]+-[0-9]+(-[ab])?`)
)

// normalizeMessage drops what differs between pods from a message, so
// the summary can count alike ones.
func normalizeMessage(m string) string {
	m = messageIDs.ReplaceAllString(m, "<id>")
	m = messagePods.ReplaceAllString(m, "<pod>")
	if len(m) > 300 {
		m = m[:300] + "..."
	}
	return m
}

// checkContainer is invariant 1 for one container.
func (s *Soak) checkContainer(ctx context.Context, p *soakPodStatus, rec *soakPodRecord, container, id string, init bool, a *soakAlloc, final bool) {
	spec, err := s.c.Node.Inspect(ctx, id)
	if err != nil {
		s.unchecked(rec, id, final, fmt.Sprintf("inspect: %v", err))
		return
	}
	devs := map[string]string{}
	for _, d := range spec.Devices {
		if d.Type == "c" && d.Major == drmtest.DRMMajor {
			devs[fmt.Sprintf("%d:%d", d.Major, d.Minor)] = d.Path
		}
	}
	if spec.Pid > 0 {
		for num, path := range containerDRMNodes(spec.Pid) {
			devs[num] = path
		}
	}
	cards, ok, err := a.cards(ctx, p, container, init)
	if err != nil || !ok {
		s.unchecked(rec, id, final, fmt.Sprintf("allocation: ok %v, %v", ok, err))
		return
	}
	from, to := spec.Created.Add(-time.Second), spec.Started
	if to.IsZero() {
		to = time.Now()
	}
	to = to.Add(time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked[id] = true
	s.stats.Checked++
	var bad string
	okAny, hasCard := false, false
	for _, m := range s.topologyBetween(from, to) {
		var wrong []string
		has := false
		for num, path := range devs {
			card, held := m[num]
			switch {
			case held && cards[card]:
				has = true
			case held:
				wrong = append(wrong, fmt.Sprintf("%s (%s) is card %s", path, num, card))
			}
		}
		hasCard = hasCard || has
		if len(wrong) == 0 {
			okAny = true
		} else {
			slices.Sort(wrong)
			bad = strings.Join(wrong, ", ")
		}
	}
	who := fmt.Sprintf("%s/%s (%.12s)", p.Metadata.Name, container, id)
	if !okAny {
		s.violation("container %s started with a device node of a card not allocated to it: %s; allocated %v", who, bad, sortedKeys(cards))
	}
	if len(cards) > 0 && !hasCard {
		s.stats.WithoutCard = append(s.stats.WithoutCard, who)
	}
	if spec.Pid > 0 && len(devs) > 0 {
		s.held[id] = heldContainer{who: who, nums: devs}
	}
}

func (s *Soak) unchecked(rec *soakPodRecord, id string, final bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec.tries == nil {
		rec.tries = map[string]int{}
	}
	rec.tries[id]++
	if final || rec.gone || rec.tries[id] >= 5 {
		s.checked[id] = true
		s.stats.Unchecked++
		s.Logf("container %.12s of pod %s not checked: %s", id, rec.name, why)
	}
}

// heldContainer is a running container's DRM device numbers.
type heldContainer struct {
	who  string
	nums map[string]string
}

// topologyBetween returns the topologies in force at some time in
// [from, to]; s.mu must be held.
func (s *Soak) topologyBetween(from, to time.Time) []map[string]string {
	var out []map[string]string
	for i, e := range s.topo {
		end := time.Now()
		if i+1 < len(s.topo) {
			end = s.topo[i+1].from
		}
		if !e.from.After(to) && !end.Before(from) {
			out = append(out, e.cards)
		}
	}
	return out
}

// CountHolders records, for invariant 2, the running containers that
// hold one of nums (device numbers "226:N" that another card has just
// taken) and returns how many.
func (s *Soak) CountHolders(ctx context.Context, nums []string) int {
	s.mu.Lock()
	var cands []string
	for id, h := range s.held {
		for _, n := range nums {
			if _, ok := h.nums[n]; ok {
				cands = append(cands, id)
				break
			}
		}
	}
	s.mu.Unlock()
	count := 0
	for _, id := range cands {
		spec, err := s.c.Node.Inspect(ctx, id)
		if err != nil || spec.Pid == 0 {
			continue
		}
		s.mu.Lock()
		s.stats.HeldThroughRenumber = append(s.stats.HeldThroughRenumber, s.held[id].who)
		s.mu.Unlock()
		count++
	}
	return count
}

// containerDRMNodes lists the DRM char devices under the container's
// /dev/dri, seen through /proc/<pid>/root: "226:N" -> path.
func containerDRMNodes(pid int) map[string]string {
	out := map[string]string{}
	root := fmt.Sprintf("/proc/%d/root", pid)
	_ = filepath.WalkDir(filepath.Join(root, "dev", "dri"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeCharDevice == 0 {
			return nil
		}
		var st unix.Stat_t
		if unix.Stat(path, &st) != nil {
			return nil
		}
		if unix.Major(st.Rdev) == drmtest.DRMMajor {
			out[fmt.Sprintf("%d:%d", drmtest.DRMMajor, unix.Minor(st.Rdev))] = strings.TrimPrefix(path, root)
		}
		return nil
	})
	return out
}

// HostCardsByNumber maps each DRM device number the (fake) host's sysfs
// lists under <sysfs>/dev/char to the ID of the card it belongs to (its
// parent device's name).
func HostCardsByNumber(sysfs string) (map[string]string, error) {
	dir := filepath.Join(sysfs, "dev", "char")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("host cards: %w", err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), fmt.Sprintf("%d:", drmtest.DRMMajor)) {
			continue
		}
		minorDir, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // unbound while we read
		}
		dev, err := filepath.EvalSymlinks(filepath.Join(minorDir, "device"))
		if err != nil {
			continue
		}
		out[e.Name()] = filepath.Base(dev)
	}
	return out, nil
}

// soakAlloc reads allocations from the kubelet and the API server, once
// per check pass.
type soakAlloc struct {
	s *Soak
	// device plugin: "pod/container" -> card IDs (PodResources), and
	// "pod UID/container" -> card IDs (the kubelet's checkpoint).
	dp, dpInit map[string][]string
	// DRA: claim name -> card IDs.
	claims map[string][]string
}

// cards returns the cards allocated to the pod's container; ok is false
// when the source does not know the container.
func (a *soakAlloc) cards(ctx context.Context, p *soakPodStatus, container string, init bool) (map[string]bool, bool, error) {
	out := map[string]bool{}
	if a.s.opts.Mode == SoakDevicePlugin {
		if a.dp == nil {
			var err error
			if a.dp, err = a.s.c.Node.ListAllocations(ctx, a.s.opts.Resource); err != nil {
				return nil, false, err
			}
			if a.dpInit, err = KubeletCheckpointAllocations(a.s.opts.Resource); err != nil {
				return nil, false, err
			}
		}
		src, key := a.dp, "default/"+p.Metadata.Name+"/"+container
		if init {
			src, key = a.dpInit, p.Metadata.UID+"/"+container
		}
		ids, ok := src[key]
		for _, id := range ids {
			out[alloc.CardID(id)] = true
		}
		return out, ok, nil
	}
	if a.claims == nil {
		if err := a.loadClaims(ctx); err != nil {
			return nil, false, err
		}
	}
	var names []string
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil {
			names = append(names, *rc.ResourceClaimName)
		}
	}
	for _, st := range p.Status.ResourceClaimStatuses {
		if st.ResourceClaimName != nil {
			names = append(names, *st.ResourceClaimName)
		}
	}
	if len(names) == 0 {
		return nil, false, nil
	}
	for _, n := range names {
		ids, ok := a.claims[n]
		if !ok {
			return nil, false, nil
		}
		for _, id := range ids {
			out[id] = true
		}
	}
	return out, true, nil
}

func (a *soakAlloc) loadClaims(ctx context.Context) error {
	slice, err := a.s.c.ResourceSliceDevices(ctx, DRADriver)
	if err != nil {
		return err
	}
	claims, err := a.s.c.Claims(ctx, "default")
	if err != nil {
		return err
	}
	a.claims = map[string][]string{}
	for _, cl := range claims {
		if cl.Status.Allocation == nil {
			continue
		}
		var ids []string
		for _, d := range cl.Devices() {
			if sd, ok := slice[d]; ok {
				ids = append(ids, sd.Attributes["id"])
			} else {
				return fmt.Errorf("claim %s: device %s is in no slice of %s", cl.Metadata.Name, d, DRADriver)
			}
		}
		a.claims[cl.Metadata.Name] = ids
	}
	return nil
}

// DRADriver is dri-cdi's DRA driver name.
const DRADriver = "dri-cdi.dev"

// collectEvents counts the Warning events of the soak pods (invariant
// 5: each must say why).
func (s *Soak) collectEvents(ctx context.Context) error {
	var list struct {
		Items []struct {
			Type           string `json:"type"`
			Reason         string `json:"reason"`
			Message        string `json:"message"`
			Count          int    `json:"count"`
			InvolvedObject struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"involvedObject"`
		} `json:"items"`
	}
	if err := s.c.GetJSON(ctx, &list, "events", "-n", "default"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range list.Items {
		if e.Type != "Warning" || e.InvolvedObject.Kind != "Pod" || !strings.HasPrefix(e.InvolvedObject.Name, "soak-") {
			continue
		}
		if strings.TrimSpace(e.Message) == "" {
			s.violation("Warning event %s on pod %s without a message", e.Reason, e.InvolvedObject.Name)
		}
		s.stats.Failures["event "+e.Reason+": "+normalizeMessage(e.Message)] += max(e.Count, 1)
	}
	return nil
}

// SoakSnapshot is the node's state for the leak checks.
type SoakSnapshot struct {
	// SpecFiles are the names in the spec dir.
	SpecFiles []string
	// Sockets are the sockets in the kubelet's device-plugin and plugin
	// dirs and the NRI dir.
	Sockets []string
	// CheckpointClaims counts the DRA plugin's checkpoint entries.
	CheckpointClaims int
	// Daemons are the product containers' resources, by name.
	Daemons map[string]DaemonSample
}

// DaemonSample is one daemon's resources, from its /metrics.
type DaemonSample struct {
	RSS                       float64
	FDs, Goroutines, Restarts int
}

func (s *Soak) snapshot(ctx context.Context) (*SoakSnapshot, error) {
	n := s.c.Node
	snap := &SoakSnapshot{Daemons: map[string]DaemonSample{}}
	entries, err := os.ReadDir(n.CDIDir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		snap.SpecFiles = append(snap.SpecFiles, e.Name())
	}
	for _, dir := range []string{DevicePluginDir, n.PluginsDir(), n.PluginsRegistryDir(), filepath.Dir(n.NRISocket)} {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeSocket != 0 {
				snap.Sockets = append(snap.Sockets, path)
			}
			return nil
		})
	}
	if s.opts.Mode == SoakDRA {
		raw, err := os.ReadFile(filepath.Join(n.DRAPluginDir(), "checkpoint.json"))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err == nil {
			var cp struct {
				Claims map[string]json.RawMessage `json:"claims"`
			}
			if err := json.Unmarshal(raw, &cp); err != nil {
				return nil, fmt.Errorf("DRA checkpoint: %w", err)
			}
			snap.CheckpointClaims = len(cp.Claims)
		}
	}
	pods, err := s.c.Pods(ctx, s.opts.DaemonNamespace, s.opts.DaemonPods)
	if err != nil {
		return nil, err
	}
	if len(pods) != 1 {
		return nil, fmt.Errorf("%d pods %s in %s, want 1", len(pods), s.opts.DaemonPods, s.opts.DaemonNamespace)
	}
	for name, port := range s.opts.Daemons {
		m, err := daemonMetrics(ctx, pods[0].Status.PodIP, port)
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", name, err)
		}
		rss, _ := m.Sum("process_resident_memory_bytes")
		fds, _ := m.Sum("process_open_fds")
		gor, _ := m.Sum("go_goroutines")
		d := DaemonSample{RSS: rss, FDs: int(fds), Goroutines: int(gor)}
		for _, cs := range pods[0].Status.ContainerStatuses {
			if cs.Name == name {
				d.Restarts = cs.RestartCount
			}
		}
		snap.Daemons[name] = d
	}
	return snap, nil
}

func daemonMetrics(ctx context.Context, ip string, port int) (Metrics, error) {
	return ScrapeMetrics(ctx, fmt.Sprintf("http://%s:%d/metrics", ip, port), 10*time.Second)
}

// checkLeaks waits for the node to come back to its baseline, then
// compares (invariant 4).
func (s *Soak) checkLeaks(ctx context.Context) error {
	base := s.baseline
	var end *SoakSnapshot
	settled := func() bool {
		snap, err := s.snapshot(ctx)
		if err != nil {
			return false
		}
		end = snap
		return slices.Equal(snap.SpecFiles, base.SpecFiles) && len(snap.Sockets) == len(base.Sockets) && snap.CheckpointClaims == 0
	}
	_ = poll(ctx, 90*time.Second, func() (bool, error) { return settled(), nil })
	if end == nil {
		snap, err := s.snapshot(ctx)
		if err != nil {
			return fmt.Errorf("soak end snapshot: %w", err)
		}
		end = snap
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.End = end
	if !slices.Equal(end.SpecFiles, base.SpecFiles) {
		s.violation("spec files at the end %v, at the start %v", end.SpecFiles, base.SpecFiles)
	}
	if len(end.Sockets) != len(base.Sockets) {
		s.violation("sockets at the end %v, at the start %v", end.Sockets, base.Sockets)
	}
	if end.CheckpointClaims != 0 {
		s.violation("%d claims left in the DRA checkpoint after every claim was deleted", end.CheckpointClaims)
	}
	for name, a := range base.Daemons {
		z := end.Daemons[name]
		if z.FDs > a.FDs+soakFDSlack {
			s.violation("%s: %d open fds at the end, %d at the start (bound +%d)", name, z.FDs, a.FDs, soakFDSlack)
		}
		if z.Goroutines > a.Goroutines+soakGoroutineSlack {
			s.violation("%s: %d goroutines at the end, %d at the start (bound +%d)", name, z.Goroutines, a.Goroutines, soakGoroutineSlack)
		}
		if z.RSS > a.RSS+soakRSSSlack {
			s.violation("%s: RSS %.1f MiB at the end, %.1f MiB at the start (bound +%d MiB)", name, z.RSS/(1<<20), a.RSS/(1<<20), soakRSSSlack>>20)
		}
	}
	return nil
}

// allSettled reports whether every soak pod that was scheduled ran,
// failed, or was reported late.
func (s *Soak) allSettled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.pods {
		if !r.gone && r.scheduled && !r.ran && !r.failed && !r.late {
			return false
		}
	}
	return true
}
