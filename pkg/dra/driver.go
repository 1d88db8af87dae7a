package dra

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/types"
	healthpb "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/backoff"
	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/dmem"
	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/dri-cdi/dri-cdi/pkg/podresources"
)

// DriverName is the DRA driver name of dri-cdi: the slices' driver, the
// domain of the unqualified attributes, the plugin's registration name.
// Its one home is pkg/config, which the NRI plugin and doctor read
// without linking the plugin.
const DriverName = config.DRADriver

// Defaults of Options: the kubelet's directories on a standard node.
var (
	// DefaultPluginDataDir holds dra.sock, the checkpoint and the lock.
	DefaultPluginDataDir = config.DRAPluginDataDir
	// DefaultRegistrarDir is where the kubelet looks for plugins.
	DefaultRegistrarDir = config.DRARegistrarDir
)

const (
	// healthResend is how often the health report is sent unchanged,
	// inside the kubelet's 30 s staleness window.
	healthResend = 10 * time.Second
	// startRetryMax caps the backoff of a failed start of the kubelet
	// sockets (the kubelet may create its directories after we start).
	startRetryMax = 30 * time.Second
)

// Errors a claim can be refused with; the message names the claim, the
// device and the reason.
var (
	ErrNotAllocated   = errors.New("claim is not allocated")
	ErrNoDevice       = errors.New("claim has no device of this driver")
	ErrWrongPool      = errors.New("device is in another node's pool")
	ErrUnknownDevice  = errors.New("device is not published on this node")
	ErrUnhealthy      = errors.New("card unavailable")
	ErrOpaqueConfig   = errors.New("opaque device configuration is not supported")
	ErrAlreadyInUse   = errors.New("card is prepared for another claim")
	ErrMalformedClaim = errors.New("malformed allocation")
)

// Options configure a Driver.
type Options struct {
	// NodeName is this node; the pool's name.
	NodeName string
	// Kind is the CDI kind of the cards' specs (config.Kind()).
	Kind string
	// SysfsRoot is read for the PCIe root attribute.
	SysfsRoot string
	// CgroupRoot is the host's cgroup v2 mount, whose dmem.capacity
	// gives shared cards their memory capacity; empty means
	// dmem.DefaultCgroupRoot.
	CgroupRoot string
	// PluginDataDir holds the DRA socket and the checkpoint;
	// RegistrarDir is the kubelet's plugin registration directory. They
	// must be the same paths on the host.
	PluginDataDir, RegistrarDir string
	// PodUID, when set, enables rolling updates: the sockets are named
	// after the pod, so that two instances serve side by side.
	PodUID string
	// API publishes slices and reads claims (draapi.Client).
	API API
	// Log receives the driver's logs.
	Log *logrus.Entry
	// Metrics, if set, counts prepares and publishes.
	Metrics *Metrics
	// PodResources, when set, tells the usage scans which claims each
	// container holds its cards through (ContainerClaims).
	PodResources *podresources.Client
}

// Driver is the DRA kubelet plugin: the agent loop's Backend (Update
// turns pools into the node's ResourceSlice) and the kubelet's DRA
// plugin (kubelet.go: registration, prepare, unprepare, health).
type Driver struct {
	opts    Options
	claims  *claimStore
	orphans *orphans
	log     *logrus.Entry

	// updateMu serializes Update and republish.
	updateMu sync.Mutex
	mu       sync.Mutex
	inv      Inventory
	updated  bool
	// healthChanged is closed and replaced when the devices change.
	healthChanged chan struct{}
	server        *kubeletServer
	// startErr is why the last start of the kubelet sockets failed (Ready).
	startErr  error
	published bool
	fatal     chan error
	pub       *slicePublisher
	// pools and unhealthy are the last pass's, for a publish without
	// shares (shares.go).
	pools     []config.Pool
	unhealthy map[string]bool
	// noShares is set once the API server was found to drop the shares.
	noShares bool
	// dmemWarn logs an unreadable dmem.capacity once.
	dmemWarn sync.Once
	// trace, when set (Run), logs the startup's steps and times the
	// gRPC calls.
	trace *startTrace
}

var _ agent.InUseReporter = (*Driver)(nil)

// NewDriver checks the options; nothing is started until Run.
func NewDriver(o Options) (*Driver, error) {
	switch {
	case o.NodeName == "":
		return nil, errors.New("node name is empty (set --node-name or DRI_CDI_NODE_NAME from the downward API)")
	case o.API == nil:
		return nil, errors.New("no Kubernetes client")
	case o.Log == nil:
		return nil, errors.New("no logger")
	case o.Kind == "":
		return nil, errors.New("CDI kind is empty")
	}
	if o.PluginDataDir == "" {
		o.PluginDataDir = DefaultPluginDataDir
	}
	if o.RegistrarDir == "" {
		o.RegistrarDir = DefaultRegistrarDir
	}
	d := &Driver{
		opts:          o,
		claims:        newClaimStore(filepath.Join(o.PluginDataDir, CheckpointFile)),
		orphans:       newOrphans(),
		log:           o.Log,
		healthChanged: make(chan struct{}),
		fatal:         make(chan error, 1),
		pub:           newSlicePublisher(o.API, o.NodeName, o.Log.WithField("part", "ResourceSlice")),
	}
	d.pub.synced, d.pub.failed = d.sliceSynced, d.sliceFailed
	return d, nil
}

// Update publishes the cards of one agent pass as the node's slice
// (agent.Publisher): it keeps them for prepare and hands them to the
// slice publisher, without waiting for the API server.
func (d *Driver) Update(pools []config.Pool, unhealthy map[string]bool) error {
	d.updateMu.Lock()
	defer d.updateMu.Unlock()
	d.update(pools, unhealthy)
	return nil
}

// dmemRegions are the kernel's dmem regions, none where it has no dmem
// or its dmem.capacity cannot be read (logged once).
func (d *Driver) dmemRegions() []dmem.Region {
	h, err := dmem.ReadHost(d.opts.CgroupRoot)
	if err != nil {
		d.dmemWarn.Do(func() {
			d.log.WithError(err).Warn("cannot read the kernel's dmem regions: shared cards are published without a memory capacity")
		})
		return nil
	}
	return h.Regions
}

// republish builds the last pass's devices again (after the shares
// were found dropped) and has Run publish them.
func (d *Driver) republish() {
	d.updateMu.Lock()
	defer d.updateMu.Unlock()
	d.mu.Lock()
	pools, unhealthy := d.pools, d.unhealthy
	d.mu.Unlock()
	d.update(pools, unhealthy)
}

// update is Update; callers hold updateMu, so that the devices of the
// latest pass are the ones kept.
func (d *Driver) update(pools []config.Pool, unhealthy map[string]bool) {
	d.mu.Lock()
	d.pools, d.unhealthy = pools, unhealthy
	if d.noShares {
		pools = withoutShares(pools)
	}
	d.mu.Unlock()
	inv, problems := Build(pools, unhealthy, d.opts.SysfsRoot)
	if len(inv.shared()) > 0 {
		inv = withMemory(inv, d.dmemRegions())
	}
	for _, p := range problems {
		d.log.WithError(p).Warn("card published without some attributes, or not at all")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := !d.updated || !sameDevices(d.inv.ByName, inv.ByName)
	d.inv, d.updated = inv, true
	d.trace.mark("discovery and specs")
	d.opts.Metrics.setDevices(inv.ByName)
	if changed {
		close(d.healthChanged)
		d.healthChanged = make(chan struct{})
	}
	// The publisher writes in its own goroutine: the API server must
	// stall neither the discovery loop nor prepare.
	d.pub.set(inv.Devices)
}

func sameDevices(a, b map[string]Device) bool {
	if len(a) != len(b) {
		return false
	}
	for n, x := range a {
		if y, ok := b[n]; !ok || x != y {
			return false
		}
	}
	return true
}

// sliceSynced is called after each sync that left the node's slices
// holding the devices (stored, as the API server keeps them).
func (d *Driver) sliceSynced(stored []*draapi.ResourceSlice) {
	d.opts.Metrics.published(nil)
	d.mu.Lock()
	first := !d.published
	d.published = true
	d.checkSharesKept(stored)
	d.mu.Unlock()
	if first {
		d.trace.mark("ResourceSlice published")
		log := d.log.WithField("slices", len(stored))
		if d.trace != nil {
			log = log.WithField("sinceStartMs", ms(d.trace.since()))
		}
		log.Info("ResourceSlice published")
	}
}

// sliceFailed counts a failed sync (the publisher logs and retries it).
func (d *Driver) sliceFailed(err error) {
	d.opts.Metrics.published(err)
	d.opts.Metrics.error("publish")
}

// Ready is nil once the slice is published and the kubelet
// acknowledged the registration.
func (d *Driver) Ready() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.server == nil && d.startErr != nil:
		return fmt.Errorf("kubelet plugin not started: %w", d.startErr)
	case d.server == nil:
		return errors.New("kubelet plugin not started")
	case !d.published:
		return errors.New("ResourceSlice not published yet")
	}
	st := d.server.status.Load()
	if st == nil {
		return errors.New("not registered with the kubelet yet")
	}
	if !st.PluginRegistered {
		return fmt.Errorf("kubelet refused the registration: %s", st.Error)
	}
	return nil
}

// pluginDataDirMode is the mode of --plugin-data-dir when the plugin
// creates it: it holds the DRA socket the kubelet (root) dials and the
// root-only checkpoint, so nobody else needs to list or enter it; the
// kubelet creates its own plugin directories 0750 as well.
const pluginDataDirMode = 0o750

// Run publishes the node's slices and serves the kubelet (retrying with
// backoff while the sockets cannot be created) until ctx ends or a gRPC
// server fails.
func (d *Driver) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	// The slices are published from the first pass on, while the
	// sockets start: the scheduler needs only the slice.
	wg.Go(func() { d.pub.run(ctx) })
	retry := backoff.New(time.Second, startRetryMax)
	for {
		srv, err := d.startKubeletServer()
		d.mu.Lock()
		d.startErr, d.server = err, srv
		d.mu.Unlock()
		if err == nil {
			break
		}
		wait := retry.Next()
		d.log.WithError(err).WithField("retry_in", wait).Error("cannot start the kubelet plugin")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	defer d.server.stop()
	d.log.WithFields(logrus.Fields{"driver": DriverName, "pool": d.opts.NodeName, "pluginDataDir": d.opts.PluginDataDir,
		"registrarDir": d.opts.RegistrarDir, "rollingUpdate": d.opts.PodUID != ""}).Info("kubelet plugin started")
	d.trace.mark("kubelet plugin started")
	// Checkpoint entries of claims that are gone are collected from now
	// on, off the prepare path.
	wg.Go(func() { d.collectOrphans(ctx, d.orphans) })
	select {
	case <-ctx.Done():
		return nil
	case err := <-d.fatal:
		return err
	}
}

// fail stops Run with err (a gRPC server stopped serving).
func (d *Driver) fail(err error) {
	d.opts.Metrics.error("fatal")
	d.log.WithError(err).Error("kubelet plugin failed")
	select {
	case d.fatal <- err:
	default:
	}
}

// PrepareResult is one claim's answer to prepare: its devices, or why it
// was refused.
type PrepareResult struct {
	Devices []ResultDevice
	Err     error
}

// ResultDevice is one prepared device as the kubelet gets it.
type ResultDevice struct {
	Requests             []string
	PoolName, DeviceName string
	CDIDeviceIDs         []string
	ShareID              *types.UID
}

// ClaimRef is the kubelet's name of a claim.
type ClaimRef struct {
	Namespace, Name string
	UID             types.UID
}

// PrepareResourceClaims returns, for each claim, the CDI device of each
// allocated card of this driver: <kind>=<card ID>, the name the device
// plugin's Allocate returns, resolved by containerd from the same spec
// files. A claim prepared before (same UID: the kubelet retries, several
// pods share it, the plugin restarted) gets its recorded answer again. A
// claim that cannot be prepared gets an error naming it and the reason;
// the others are still prepared. A checkpoint that cannot be read or
// saved fails the call (see claimStore); the kubelet retries it.
func (d *Driver) PrepareResourceClaims(_ context.Context, claims []*draapi.ResourceClaim) (map[types.UID]PrepareResult, error) {
	start := time.Now()
	defer func() {
		if d.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
			d.log.WithFields(logrus.Fields{"claims": len(claims), "us": time.Since(start).Microseconds()}).Debug("PrepareResourceClaims done")
		}
	}()
	d.mu.Lock()
	inv := d.inv
	d.mu.Unlock()
	out := make(map[types.UID]PrepareResult, len(claims))
	var t tally
	n, err := d.claims.update(func(prepared *claimSet) {
		for _, c := range claims {
			if c == nil {
				continue
			}
			log := d.log.WithFields(logrus.Fields{"claim": c.Namespace + "/" + c.Name, "uid": c.UID})
			old, had := prepared.get(string(c.UID))
			if had && sameAllocation(old, c) {
				out[c.UID] = PrepareResult{Devices: resultDevices(old)}
				t.count("again")
				log.Debug("claim already prepared")
				continue
			}
			if had {
				// The record answers an allocation the claim no longer has
				// (kubelet state lost, an unprepare that never reached us):
				// its card may be another claim's now. The claim's current
				// allocation is prepared instead, or refused naming both.
				prepared.remove(string(c.UID))
				log.WithFields(logrus.Fields{"recorded": recordedDevices(old), "allocated": allocationOf(c)}).
					Warn("claim's allocation changed since it was prepared; preparing it again")
			}
			pc, err := d.prepareClaim(c, inv, prepared)
			if err != nil && had {
				err = fmt.Errorf("%w (its allocation changed from %v, prepared before, to %v)", err, recordedDevices(old), allocationOf(c))
			}
			if err != nil {
				err = fmt.Errorf("claim %s/%s (%s): %w", c.Namespace, c.Name, c.UID, err)
				out[c.UID] = PrepareResult{Err: err}
				t.count(reason(err))
				log.WithError(err).Warn("claim not prepared")
				continue
			}
			prepared.add(string(c.UID), pc)
			out[c.UID] = PrepareResult{Devices: resultDevices(pc)}
			t.changed(log.WithField("cards", cardsOf(pc)))
		}
	})
	if err != nil {
		// The checkpoint could not be read, or not saved (claimStore):
		// the call fails for every claim, and the kubelet retries it.
		d.opts.Metrics.prepare("checkpoint", len(claims))
		return nil, err
	}
	t.report(d.opts.Metrics, d.opts.Metrics.prepare, "claim prepared", n)
	return out, nil
}

// tally is what one prepare or unprepare call did: its claims by metric
// result, and a log entry for each claim it prepared or unprepared.
// report counts and logs them once the call's save returned nil, so that
// nothing of a call that failed counts as done.
type tally struct {
	results map[string]int
	done    []*logrus.Entry
}

func (t *tally) count(result string) {
	if t.results == nil {
		t.results = map[string]int{}
	}
	t.results[result]++
}

// changed counts one claim as success, and logs it as msg in report.
func (t *tally) changed(log *logrus.Entry) {
	t.count("success")
	t.done = append(t.done, log)
}

// report counts and logs the call, and sets the gauge to the prepared
// claims after it.
func (t *tally) report(m *Metrics, count func(result string, n int), msg string, prepared int) {
	for r, n := range t.results {
		count(r, n)
	}
	for _, log := range t.done {
		log.Info(msg)
	}
	m.setPrepared(prepared)
}

// prepareClaim maps one claim's allocation to cards.
func (d *Driver) prepareClaim(c *draapi.ResourceClaim, inv Inventory, prepared *claimSet) (PreparedClaim, error) {
	pc := PreparedClaim{Namespace: c.Namespace, Name: c.Name}
	alloc := c.Status.Allocation
	if alloc == nil {
		return pc, ErrNotAllocated
	}
	for _, cfg := range alloc.Devices.Config {
		if cfg.Opaque != nil && cfg.Opaque.Driver == DriverName {
			return pc, fmt.Errorf("%w (config for requests %v)", ErrOpaqueConfig, cfg.Requests)
		}
	}
	seen := map[string]bool{}
	for _, r := range alloc.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Request == "" || r.Device == "" {
			return pc, fmt.Errorf("%w: result without request or device name (request %q, device %q)", ErrMalformedClaim, r.Request, r.Device)
		}
		if r.Pool != d.opts.NodeName {
			return pc, fmt.Errorf("device %q: %w %q, this node is %q", r.Device, ErrWrongPool, r.Pool, d.opts.NodeName)
		}
		dev, ok := inv.ByName[r.Device]
		if !ok {
			return pc, fmt.Errorf("device %q: %w (the card left, or never was here)", r.Device, ErrUnknownDevice)
		}
		if !dev.Healthy {
			return pc, fmt.Errorf("device %q (card %s): %w: %s", r.Device, dev.Card, ErrUnhealthy, UnavailableReason)
		}
		admin := r.AdminAccess != nil && *r.AdminAccess
		use, err := shareOf(r, dev)
		if err != nil {
			return pc, err
		}
		use.Admin = admin
		key := r.Device + "/" + use.ShareID
		if seen[key] && !admin {
			return pc, fmt.Errorf("%w: device %q allocated twice", ErrMalformedClaim, r.Device)
		}
		seen[key] = true
		// The last-line check: the scheduler allocated the card to one
		// claim only, or its shares to claims up to its capacity.
		if h, ok := prepared.conflict(use, pc.Devices); ok {
			return pc, fmt.Errorf("device %q (card %s): %w %s", r.Device, dev.Card, ErrAlreadyInUse, h)
		}
		pc.Devices = append(pc.Devices, PreparedDevice{
			Request: r.Request, Pool: r.Pool, Device: r.Device, Card: dev.Card,
			CDI: []string{cdi.QualifiedName(d.opts.Kind, dev.Card)}, Resource: dev.Resource, AdminAccess: admin,
			ShareID: use.ShareID, Shares: use.Shares, Memory: use.Memory,
		})
	}
	if len(pc.Devices) == 0 {
		return pc, ErrNoDevice
	}
	return pc, nil
}

// shareOf is how result r uses card dev: a share of a shared card, with
// the shares it consumes (one when the scheduler recorded no amount: the
// request policy's default), or the whole card. A share of a card that
// is not shared now, or an amount outside 1 to the card's shares, is
// refused (ErrMalformedClaim).
func shareOf(r draapi.DeviceRequestAllocationResult, dev Device) (cardUse, error) {
	use := cardUse{Card: dev.Card}
	if r.ShareID == nil || *r.ShareID == "" {
		return use, nil
	}
	use.ShareID, use.Shares, use.Capacity = string(*r.ShareID), 1, int64(dev.Shares)
	if q, ok := r.ConsumedCapacity[CapacityMemory]; ok {
		n, exact := q.AsInt64()
		if !exact || n < 0 || n > dev.Memory {
			return use, fmt.Errorf("%w: device %q (card %s): share %s consumes %s bytes of memory, the card publishes %d",
				ErrMalformedClaim, r.Device, dev.Card, string(*r.ShareID), q.String(), dev.Memory)
		}
		// A zero amount is not recorded: nothing is limited to 0.
		use.Memory, use.MemoryCapacity = n, dev.Memory
	}
	if dev.Shares == 0 {
		return use, fmt.Errorf("%w: device %q (card %s) is allocated as share %s, but its pool has no shares on this node",
			ErrMalformedClaim, r.Device, dev.Card, use.ShareID)
	}
	if q, ok := r.ConsumedCapacity[CapacityShares]; ok {
		n, exact := q.AsInt64()
		if !exact || n < 1 || n > use.Capacity {
			return use, fmt.Errorf("%w: device %q (card %s): share %s consumes %s shares, the card has %d",
				ErrMalformedClaim, r.Device, dev.Card, use.ShareID, q.String(), use.Capacity)
		}
		use.Shares = n
	}
	return use, nil
}

// sameAllocation reports whether the claim's allocation of this
// driver's devices is what pc was prepared from: the same results
// (request, pool, device, admin access, share), in order. It reads no more than
// the claim's results, so an unchanged claim's repeated prepare stays a
// lookup.
func sameAllocation(pc PreparedClaim, c *draapi.ResourceClaim) bool {
	if c.Status.Allocation == nil {
		return false
	}
	i := 0
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if i >= len(pc.Devices) {
			return false
		}
		dev := pc.Devices[i]
		admin := r.AdminAccess != nil && *r.AdminAccess
		// A record without AdminAccess matches an admin result: versions
		// before the flag recorded none.
		share := ""
		if r.ShareID != nil {
			share = string(*r.ShareID)
		}
		if dev.Request != r.Request || dev.Pool != r.Pool || dev.Device != r.Device || (dev.AdminAccess && !admin) || dev.ShareID != share {
			return false
		}
		i++
	}
	return i == len(pc.Devices)
}

// recordedDevices names the devices pc was prepared with, as "<pool>/<device>".
func recordedDevices(pc PreparedClaim) []string {
	out := make([]string, len(pc.Devices))
	for i, dev := range pc.Devices {
		out[i] = dev.Pool + "/" + dev.Device
	}
	return out
}

// allocationOf names the devices of this driver c is allocated now.
func allocationOf(c *draapi.ResourceClaim) []string {
	var out []string
	if c.Status.Allocation == nil {
		return out
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == DriverName {
			out = append(out, r.Pool+"/"+r.Device)
		}
	}
	return out
}

func resultDevices(pc PreparedClaim) []ResultDevice {
	out := make([]ResultDevice, len(pc.Devices))
	for i, dev := range pc.Devices {
		out[i] = ResultDevice{
			Requests: []string{dev.Request}, PoolName: dev.Pool, DeviceName: dev.Device,
			CDIDeviceIDs: slices.Clone(dev.CDI),
		}
		if dev.ShareID != "" {
			id := types.UID(dev.ShareID)
			out[i].ShareID = &id
		}
	}
	return out
}

func cardsOf(pc PreparedClaim) []string {
	out := make([]string, len(pc.Devices))
	for i, dev := range pc.Devices {
		out[i] = dev.Card
	}
	return out
}

// reason is the metric label of a refused claim.
func reason(err error) string {
	for _, r := range []struct {
		err  error
		name string
	}{
		{ErrNotAllocated, "not_allocated"}, {ErrNoDevice, "no_device"}, {ErrWrongPool, "wrong_pool"},
		{ErrUnknownDevice, "unknown_device"}, {ErrUnhealthy, "unhealthy"}, {ErrOpaqueConfig, "opaque_config"},
		{ErrAlreadyInUse, "in_use"}, {ErrMalformedClaim, "malformed"},
	} {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return "other"
}

// UnprepareResourceClaims forgets the claims. The per-card spec files
// are shared by every claim of the card and by the device plugin's
// naming, so nothing is deleted; the card is free for another claim. A
// claim not prepared (already unprepared, or prepared by nobody) is not
// an error.
func (d *Driver) UnprepareResourceClaims(_ context.Context, claims []ClaimRef) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	var t tally
	n, err := d.claims.update(func(prepared *claimSet) {
		for _, c := range claims {
			out[c.UID] = nil
			pc, ok := prepared.remove(string(c.UID))
			if !ok {
				t.count("not_prepared")
				continue
			}
			t.changed(d.log.WithFields(logrus.Fields{"claim": c.Namespace + "/" + c.Name, "uid": c.UID, "cards": cardsOf(pc)}))
		}
	})
	if err != nil {
		// As in prepare: the call fails, and the kubelet retries it.
		d.opts.Metrics.unprepare("checkpoint", len(claims))
		return nil, err
	}
	t.report(d.opts.Metrics, d.opts.Metrics.unprepare, "claim unprepared", n)
	return out, nil
}

// CardsInUse returns the cards of the checkpointed claims, each with the
// resource it was published under when its claim was prepared, or ""
// for a claim an earlier version prepared (agent.InUseReporter). The
// agent loop seeds them, so a card a prepared claim holds that is unbound
// when the plugin starts stays in the slice, tainted, as if the plugin
// had watched the unbind; one of unknown resource is published again only
// once it binds.
func (d *Driver) CardsInUse() (map[string]string, error) {
	return d.claims.cardsInUse()
}

// Prepared returns the checkpointed claims (doctor, tests).
func (d *Driver) Prepared() (map[string]PreparedClaim, error) {
	return d.claims.claims()
}

// watchHealth sends every published device's health: Healthy, or
// Unhealthy with the taint's reason, when the devices change and every
// healthResend (the kubelet takes a device's health as unknown when it
// heard nothing of it for 30 s).
func (d *Driver) watchHealth(ctx context.Context, send func(*healthpb.NodeWatchResourcesResponse) error) error {
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		d.mu.Lock()
		report, changed := d.healthReport(), d.healthChanged
		d.mu.Unlock()
		if err := send(report); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-t.C:
		}
	}
}

func (d *Driver) healthReport() *healthpb.NodeWatchResourcesResponse {
	now := time.Now().Unix()
	names := make([]string, 0, len(d.inv.ByName))
	for n := range d.inv.ByName {
		names = append(names, n)
	}
	slices.Sort(names)
	r := &healthpb.NodeWatchResourcesResponse{Devices: make([]*healthpb.DeviceHealth, 0, len(names))}
	for _, n := range names {
		dev := d.inv.ByName[n]
		h := &healthpb.DeviceHealth{
			Device: &healthpb.DeviceIdentifier{PoolName: d.opts.NodeName, DeviceName: n},
			Health: healthpb.HealthStatus_HEALTHY, LastUpdatedTime: now,
		}
		if !dev.Healthy {
			h.Health = healthpb.HealthStatus_UNHEALTHY
			h.Message = strings.Join([]string{"card", dev.Card, ErrUnhealthy.Error(), UnavailableReason}, " ")
		}
		r.Devices = append(r.Devices, h)
	}
	return r
}
