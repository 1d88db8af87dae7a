package dra

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
	"github.com/dri-cdi/dri-cdi/pkg/atomicfile"
)

// newDriver is a Driver on data with testPools published, not started:
// its prepare and unprepare are called directly, without the gRPC server
// (the claim store serializes them either way).
func newDriver(t *testing.T, data string) *Driver {
	t.Helper()
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: t.TempDir(),
		PluginDataDir: data, API: apiOf(fakeClient()), Log: testEntry(t)})
	require.NoError(t, err)
	require.NoError(t, d.Update(testPools(), nil))
	return d
}

// allocated is an allocated claim in namespace ns.
func allocated(name, uid string, results ...draapi.DeviceRequestAllocationResult) *draapi.ResourceClaim {
	return &draapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status:     draapi.ResourceClaimStatus{Allocation: &draapi.AllocationResult{Devices: draapi.DeviceAllocationResult{Results: results}}},
	}
}

func ref(c *draapi.ResourceClaim) ClaimRef {
	return ClaimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID}
}

// The store serializes prepare on its own: claims for one card prepared
// at once, by calls nobody serializes, give the card to exactly one of
// them, and the checkpoint records that one.
func TestClaimStoreSerializesPrepare(t *testing.T) {
	d := newDriver(t, t.TempDir())
	const n = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		winners []string
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := allocated(fmt.Sprint("c", i), fmt.Sprint("uid-", i), result("gpu", "pci-0000-01-00-0"))
			<-start
			got, err := d.PrepareResourceClaims(context.Background(), []*draapi.ResourceClaim{c})
			if !assert.NoError(t, err) {
				return
			}
			if got[c.UID].Err == nil {
				mu.Lock()
				winners = append(winners, string(c.UID))
				mu.Unlock()
			} else {
				assert.ErrorIs(t, got[c.UID].Err, ErrAlreadyInUse)
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, winners, 1)
	prepared, err := d.Prepared()
	require.NoError(t, err)
	require.Len(t, prepared, 1)
	require.Contains(t, prepared, winners[0])
}

// What counts as in use: an ordinary device conflicts with every
// prepared claim's device on its card, admin access or not; an admin
// device with none. Every recorded device keeps its card in use for the
// agent, and unpreparing one claim leaves the other claims' devices on
// the same card.
func TestClaimStoreInUseRules(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := context.Background()
	admin := result("mon", "pci-0000-01-00-0")
	admin.AdminAccess = ptr.To(true)
	work := allocated("work", "uid-work", result("gpu", "pci-0000-01-00-0"))
	monitor := allocated("monitor", "uid-monitor", admin)
	other := allocated("other", "uid-other", result("gpu", "pci-0000-01-00-0"))

	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{work, monitor, other})
	require.NoError(t, err)
	require.NoError(t, got["uid-work"].Err)
	require.NoError(t, got["uid-monitor"].Err, "admin access is not kept from a card in use")
	require.ErrorIs(t, got["uid-other"].Err, ErrAlreadyInUse)
	held, err := d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:01:00.0": "dri-cdi.dev/i915"}, held)

	// The admin claim keeps the card's CDI name resolving, but does not
	// keep a workload claim from it: the scheduler does not count admin
	// access as a use, so it gives the card to the next workload claim
	// while the monitor runs.
	_, err = d.UnprepareResourceClaims(ctx, []ClaimRef{ref(work)})
	require.NoError(t, err)
	held, err = d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:01:00.0": "dri-cdi.dev/i915"}, held, "the admin claim's device is still recorded")
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{other})
	require.NoError(t, err)
	require.NoError(t, got["uid-other"].Err, "a monitoring claim must not block a workload claim")
	_, err = d.UnprepareResourceClaims(ctx, []ClaimRef{ref(other)})
	require.NoError(t, err)

	_, err = d.UnprepareResourceClaims(ctx, []ClaimRef{ref(monitor)})
	require.NoError(t, err)
	held, err = d.CardsInUse()
	require.NoError(t, err)
	require.Empty(t, held)
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{other})
	require.NoError(t, err)
	require.NoError(t, got["uid-other"].Err)
}

// The defect's order: a monitoring DaemonSet's admin-access claim is
// prepared first, then the workload claim the scheduler gave the same
// card; the admin flag survives a restart of the plugin (it is in the
// checkpoint).
func TestAdminClaimFirstDoesNotBlockAWorkload(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	admin := result("mon", "pci-0000-01-00-0")
	admin.AdminAccess = ptr.To(true)
	monitor := allocated("monitor", "uid-monitor", admin)
	work := allocated("work", "uid-work", result("gpu", "pci-0000-01-00-0"))

	got, err := newDriver(t, dir).PrepareResourceClaims(ctx, []*draapi.ResourceClaim{monitor})
	require.NoError(t, err)
	require.NoError(t, got["uid-monitor"].Err)
	got, err = newDriver(t, dir).PrepareResourceClaims(ctx, []*draapi.ResourceClaim{work})
	require.NoError(t, err)
	require.NoError(t, got["uid-work"].Err, "the workload pod must not wait for the monitor")
	prepared, err := newDriver(t, dir).Prepared()
	require.NoError(t, err)
	require.True(t, prepared["uid-monitor"].Devices[0].AdminAccess)
	require.False(t, prepared["uid-work"].Devices[0].AdminAccess)
}

// saveFault makes a Driver's saves fail as atomicfile.Write fails: before
// the rename (the old file stays), or at the directory sync after it (the
// new file is in place, maybe not durable). It counts the directory syncs
// since, and can make them fail too.
type saveFault struct {
	d           *Driver
	afterRename bool
	save        func(string, map[string]PreparedClaim) error // the store's own
	syncs       atomic.Int32
	syncFails   atomic.Bool
}

// forEachSaveFault runs fn in a subtest for each kind of failed save,
// with a fresh Driver with metrics whose saves fail.
func forEachSaveFault(t *testing.T, fn func(t *testing.T, d *Driver, f *saveFault)) {
	for name, afterRename := range map[string]bool{"write fails": false, "directory sync fails": true} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t, t.TempDir())
			d.opts.Metrics = NewMetrics(prometheus.NewRegistry())
			f := &saveFault{d: d, afterRename: afterRename, save: d.claims.save}
			fn(t, d, f)
		})
	}
}

// start makes the saves fail from now on.
func (f *saveFault) start(t *testing.T) {
	f.d.claims.save = func(path string, claims map[string]PreparedClaim) error {
		if !f.afterRename {
			return fmt.Errorf("checkpoint: write %s: %w", path, syscall.ENOSPC)
		}
		require.NoError(t, saveCheckpoint(path, claims))
		return fmt.Errorf("checkpoint: sync %s: %w: %w", filepath.Dir(path), atomicfile.ErrDirSync, syscall.EIO)
	}
	f.d.claims.syncDir = func(dir string) error {
		f.syncs.Add(1)
		if f.syncFails.Load() {
			return fmt.Errorf("sync %s: %w: %w", dir, atomicfile.ErrDirSync, syscall.EIO)
		}
		return atomicfile.SyncDir(dir)
	}
}

// requireFailed requires that err is the failed save's, and that the
// call's one claim counted as checkpoint in v, not as success; then it
// lets saves work again (directory syncs stay counted).
func (f *saveFault) requireFailed(t *testing.T, err error, v *prometheus.CounterVec) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, f.afterRename, errors.Is(err, atomicfile.ErrDirSync), err.Error())
	require.Equal(t, float64(1), counter(v, "checkpoint"))
	require.Zero(t, counter(v, "success"))
	f.d.claims.save = f.save
}

// counter is the value of one result of a Metrics counter vector.
func counter(v *prometheus.CounterVec, result string) float64 {
	return testutil.ToFloat64(v.WithLabelValues(result))
}

// A prepare whose save fails fails as a whole, counts its claims as
// checkpoint and records nothing as prepared; the kubelet's retry gets
// the answer once the record is durable. After a failed directory sync
// the file already holds the claim: the retry syncs the directory before
// it answers from it, and fails while it cannot.
func TestFailedSaveFailsPrepare(t *testing.T) {
	forEachSaveFault(t, func(t *testing.T, d *Driver, f *saveFault) {
		ctx := context.Background()
		one := []*draapi.ResourceClaim{allocated("one", "uid-1", result("gpu", "pci-0000-01-00-0"))}
		f.start(t)
		got, err := d.PrepareResourceClaims(ctx, one)
		require.Nil(t, got)
		f.requireFailed(t, err, d.opts.Metrics.prepares)

		if f.afterRename {
			// Until the directory syncs, nothing is answered from the file.
			f.syncFails.Store(true)
			_, err = d.PrepareResourceClaims(ctx, one)
			require.ErrorIs(t, err, atomicfile.ErrDirSync)
			_, err = d.CardsInUse()
			require.ErrorIs(t, err, atomicfile.ErrDirSync)
			_, err = d.Prepared()
			require.ErrorIs(t, err, atomicfile.ErrDirSync)
			require.Equal(t, float64(2), counter(d.opts.Metrics.prepares, "checkpoint"))
			f.syncFails.Store(false)
		}
		synced := f.syncs.Load()
		got, err = d.PrepareResourceClaims(ctx, one)
		require.NoError(t, err)
		require.NoError(t, got["uid-1"].Err)
		require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, got["uid-1"].Devices[0].CDIDeviceIDs)
		if f.afterRename {
			require.Equal(t, synced+1, f.syncs.Load(), "the retry synced the directory first")
			require.Equal(t, float64(1), counter(d.opts.Metrics.prepares, "again"), "the failed save's file held the claim")
		} else {
			require.Zero(t, f.syncs.Load(), "a save that failed before the rename leaves nothing to sync")
			require.Equal(t, float64(1), counter(d.opts.Metrics.prepares, "success"))
		}
		// Once synced, calls read the file without syncing again.
		synced = f.syncs.Load()
		_, err = d.Prepared()
		require.NoError(t, err)
		require.Equal(t, synced, f.syncs.Load())
	})
}

// An unprepare whose save fails fails as a whole and counts its claims as
// checkpoint; its retry forgets the claim, after a failed directory sync
// only once the directory synced.
func TestFailedSaveFailsUnprepare(t *testing.T) {
	forEachSaveFault(t, func(t *testing.T, d *Driver, f *saveFault) {
		ctx := context.Background()
		c := allocated("one", "uid-1", result("gpu", "pci-0000-01-00-0"))
		got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{c})
		require.NoError(t, err)
		require.NoError(t, got["uid-1"].Err)
		one := []ClaimRef{ref(c)}
		f.start(t)
		_, err = d.UnprepareResourceClaims(ctx, one)
		f.requireFailed(t, err, d.opts.Metrics.unprepares)
		if f.afterRename {
			f.syncFails.Store(true)
			_, err = d.UnprepareResourceClaims(ctx, one)
			require.ErrorIs(t, err, atomicfile.ErrDirSync)
			f.syncFails.Store(false)
		}

		res, err := d.UnprepareResourceClaims(ctx, one)
		require.NoError(t, err)
		require.NoError(t, res["uid-1"])
		prepared, err := d.Prepared()
		require.NoError(t, err)
		require.Empty(t, prepared)
		if f.afterRename {
			require.Equal(t, float64(1), counter(d.opts.Metrics.unprepares, "not_prepared"), "the failed save's file had forgotten the claim")
			require.Positive(t, f.syncs.Load())
		} else {
			require.Equal(t, float64(1), counter(d.opts.Metrics.unprepares, "success"))
			require.Zero(t, f.syncs.Load())
		}
	})
}

// A repeated prepare of a claim UID whose allocation changed since it
// was prepared (the kubelet lost its state, or an unprepare never
// reached the plugin) prepares the current allocation: the recorded
// card, which may be another claim's now, is neither handed out again
// nor kept from others. An allocation that cannot be prepared is refused
// naming both.
func TestRepeatedPrepareFollowsAChangedAllocation(t *testing.T) {
	d := newDriver(t, t.TempDir())
	ctx := context.Background()
	first := allocated("c", "uid-c", result("gpu", "pci-0000-00-02-0"))
	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{first})
	require.NoError(t, err)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:00:02.0"}, got["uid-c"].Devices[0].CDIDeviceIDs)

	// Unchanged: the recorded answer.
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{first})
	require.NoError(t, err)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:00:02.0"}, got["uid-c"].Devices[0].CDIDeviceIDs)

	moved := allocated("c", "uid-c", result("gpu", "pci-0000-01-00-0"))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{moved})
	require.NoError(t, err)
	require.NoError(t, got["uid-c"].Err)
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, got["uid-c"].Devices[0].CDIDeviceIDs, "the current allocation, not the record")
	held, err := d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:01:00.0": "dri-cdi.dev/i915"}, held, "the old card is free")
	other := allocated("other", "uid-other", result("gpu", "pci-0000-00-02-0"))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{other})
	require.NoError(t, err)
	require.NoError(t, got["uid-other"].Err, "the card the record held is another claim's now")

	gone := allocated("c", "uid-c", result("gpu", "pci-0000-09-00-0"))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{gone})
	require.NoError(t, err)
	require.ErrorIs(t, got["uid-c"].Err, ErrUnknownDevice)
	require.ErrorContains(t, got["uid-c"].Err, "its allocation changed from [node-a/pci-0000-01-00-0], prepared before, to [node-a/pci-0000-09-00-0]")
	held, err = d.CardsInUse()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"0000:00:02.0": "dri-cdi.dev/i915"}, held, "a record of an allocation the claim no longer has holds nothing")
}

// Two stores on one checkpoint, as the two instances of a rolling update
// have (each with its own mutex), lose no update of the other: the
// orphan collection writes outside any gRPC call.
func TestClaimStoresShareTheCheckpointSafely(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointFile)
	stores := []*claimStore{newClaimStore(path), newClaimStore(path)}
	const each = 15
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				_, err := s.update(func(set *claimSet) {
					set.add(fmt.Sprintf("uid-%d-%d", i, j), PreparedClaim{Namespace: "ns", Name: "c"})
				})
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	claims, err := stores[0].claims()
	require.NoError(t, err)
	require.Len(t, claims, 2*each)
}

// A claim an earlier version prepared with admin access carries no
// AdminAccess in its record: its repeated prepare is the same
// allocation, answered from the record, even while its card is unhealthy.
func TestRepeatedPrepareOfAnEarlierVersionsAdminRecord(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	mon := result("mon", "pci-0000-01-00-0")
	mon.AdminAccess = ptr.To(true)
	monitor := allocated("monitor", "uid-monitor", mon)
	d := newDriver(t, dir)
	got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{monitor})
	require.NoError(t, err)
	require.NoError(t, got["uid-monitor"].Err)
	// What an earlier version wrote: the same record without the flag.
	_, err = d.claims.update(func(set *claimSet) {
		pc, _ := set.get("uid-monitor")
		pc.Devices[0].AdminAccess = false
		set.add("uid-monitor", pc)
	})
	require.NoError(t, err)
	require.NoError(t, d.Update(testPools(), map[string]bool{"0000:01:00.0": true}))
	got, err = d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{monitor})
	require.NoError(t, err)
	require.NoError(t, got["uid-monitor"].Err, "the recorded answer, not a new prepare of an unhealthy card")
	require.Equal(t, []string{"dri-cdi.dev/gpu=0000:01:00.0"}, got["uid-monitor"].Devices[0].CDIDeviceIDs)
}

// Two stores on one file (the two instances of a rolling update): what
// one saves, the other reads, whatever it decoded and saved before.
func TestClaimStoreSeesTheOtherInstancesSaves(t *testing.T) {
	path := filepath.Join(t.TempDir(), CheckpointFile)
	a, b := newClaimStore(path), newClaimStore(path)
	pc := func(name string) PreparedClaim {
		return PreparedClaim{Namespace: "ns", Name: name, Devices: []PreparedDevice{{Request: "gpu", Pool: node,
			Device: "pci-0000-00-02-0", Card: "0000:00:02.0", CDI: []string{"dri-cdi.dev/gpu=0000:00:02.0"}}}}
	}
	has := func(s *claimStore, uid string) bool {
		t.Helper()
		found := false
		_, err := s.update(func(set *claimSet) { _, found = set.get(uid) })
		require.NoError(t, err)
		return found
	}
	_, err := a.update(func(set *claimSet) { set.add("uid-1", pc("one")) })
	require.NoError(t, err)
	require.True(t, has(b, "uid-1"))
	_, err = b.update(func(set *claimSet) { set.add("uid-2", pc("two")); set.remove("uid-1") })
	require.NoError(t, err)
	require.False(t, has(a, "uid-1"), "a kept its own save's claims after b changed the file")
	require.True(t, has(a, "uid-2"))
	_, err = a.update(func(set *claimSet) { set.remove("uid-2") })
	require.NoError(t, err)
	require.False(t, has(b, "uid-2"), "b kept its own save's claims after a changed the file")
}
