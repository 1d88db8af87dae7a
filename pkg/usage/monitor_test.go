package usage_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

const (
	podA = "aaaaaaaa-1111-2222-3333-444455556666"
	podB = "bbbbbbbb-1111-2222-3333-444455556666"
	ctrA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	ctrB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	ctrC = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

// rig is a fake node: a proc tree, a bundle dir, a clock and a Monitor.
type rig struct {
	t       *testing.T
	proc    *usagetest.Proc
	bundles string
	now     time.Time
	m       *usage.Monitor
}

var testCards = []drm.Card{
	{ID: "0000:00:02.0", Driver: "i915", CardNode: drm.DeviceNode{Major: 226, Minor: 1}, RenderNode: &drm.DeviceNode{Major: 226, Minor: 128}},
	{ID: "0000:03:00.0", Driver: "xe", CardNode: drm.DeviceNode{Major: 226, Minor: 2}, RenderNode: &drm.DeviceNode{Major: 226, Minor: 129}},
}

func newRig(t *testing.T, idleAfter time.Duration) *rig {
	t.Helper()
	return newRigWith(t, idleAfter, nil)
}

// newRigWith is newRig with a claim source.
func newRigWith(t *testing.T, idleAfter time.Duration, claims usage.ClaimSource) *rig {
	t.Helper()
	dir := t.TempDir()
	p, err := usagetest.New(filepath.Join(dir, "proc"))
	require.NoError(t, err)
	r := &rig{t: t, proc: p, bundles: filepath.Join(dir, "bundles"), now: time.Unix(1_700_000_000, 0)}
	r.m = usage.NewMonitor(usage.Options{
		ProcRoot:  p.Root,
		Cards:     func() ([]drm.Card, error) { return testCards, nil },
		Namer:     usage.NewBundleNamer(r.bundles),
		IdleAfter: idleAfter,
		Claims:    claims,
	})
	usage.FakeMonitor(r.m, func() time.Time { return r.now })
	return r
}

// container writes the bundle of a running container.
func (r *rig) container(pod, ctr, ns, podName, name string) {
	dir := filepath.Join(r.bundles, ctr)
	require.NoError(r.t, os.MkdirAll(dir, 0o755))
	spec := map[string]any{"ociVersion": "1.2.0", "annotations": map[string]string{
		"io.kubernetes.cri.sandbox-namespace": ns, "io.kubernetes.cri.sandbox-name": podName,
		"io.kubernetes.cri.sandbox-uid": pod, "io.kubernetes.cri.container-name": name,
		"io.kubernetes.cri.container-type": "container",
	}}
	b, err := json.Marshal(spec)
	require.NoError(r.t, err)
	require.NoError(r.t, os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644))
}

func (r *rig) scan(after time.Duration) *usage.Snapshot {
	r.t.Helper()
	r.now = r.now.Add(after)
	s, err := r.m.Scan()
	require.NoError(r.t, err)
	require.Same(r.t, s, r.m.Snapshot())
	return s
}

// user finds the row of a container (by container name; "" for the
// host) on card.
func user(s *usage.Snapshot, card, container string) *usage.ContainerUsage {
	for _, c := range s.Cards {
		if c.ID != card {
			continue
		}
		for i := range c.Users {
			if c.Users[i].Container == container {
				return &c.Users[i]
			}
		}
	}
	return nil
}

func engine(u *usage.ContainerUsage, class string) *usage.EngineUsage {
	for i := range u.Engines {
		if u.Engines[i].Class == class {
			return &u.Engines[i]
		}
	}
	return nil
}

func i915(client uint64, videoNS uint64) string {
	return usagetest.FDInfo{Driver: "i915", PDev: "0000:00:02.0", ClientID: client,
		Engines: map[string]uint64{"render": 0, "video": videoNS}, Memory: map[string]uint64{"resident-system0": 1024, "total-system0": 2048}}.String()
}

func TestMonitorAttribution(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "media", "jellyfin-0", "jellyfin")
	r.container(podB, ctrB, "apps", "web-0", "web")
	// jellyfin (cgroup v2, systemd) with ffmpeg: one DRM file shared by
	// two fds of ffmpeg and inherited by its child.
	require.NoError(t, r.proc.AddProcess(100, "jellyfin", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.AddProcess(101, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(101, 5, "/dev/dri/renderD128", i915(7, 2e9)))
	require.NoError(t, r.proc.SetFD(101, 6, "/dev/dri/renderD128", i915(7, 2e9)))
	require.NoError(t, r.proc.AddProcess(102, "ffmpeg-child", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(102, 3, "/dev/dri/renderD128", i915(7, 2e9)))
	// web (cgroup v1, cgroupfs) without a GPU: a socket and /dev/null.
	require.NoError(t, r.proc.AddProcess(200, "nginx", usagetest.CgroupV1Cgroupfs(podB, ctrB)))
	require.NoError(t, r.proc.SetFD(200, 0, "/dev/null", "pos:\t0\nflags:\t02\n"))
	require.NoError(t, r.proc.SetFD(200, 1, "socket:[12345]", "pos:\t0\n"))
	// a host process on the xe card, and one on an accel device.
	require.NoError(t, r.proc.AddProcess(300, "Xorg", usagetest.CgroupHost))
	require.NoError(t, r.proc.SetFD(300, 9, "/dev/dri/card2", usagetest.FDInfo{Driver: "xe", ClientID: 1, Cycles: map[string]uint64{"rcs": 0}, TotalCycles: map[string]uint64{"rcs": 0}}.String()))
	require.NoError(t, r.proc.AddProcess(301, "npu-app", usagetest.CgroupHost))
	require.NoError(t, r.proc.SetFD(301, 4, "/dev/accel/accel0", usagetest.FDInfo{Driver: "intel_vpu", ClientID: 3, Engines: map[string]uint64{"compute": 5}}.String()))
	// a DRM node whose driver writes no stats (vkms).
	require.NoError(t, r.proc.AddProcess(302, "kms", usagetest.CgroupHost))
	require.NoError(t, r.proc.SetFD(302, 4, "/dev/dri/card0", "pos:\t0\nflags:\t02\n"))

	s := r.scan(0)
	require.Len(t, s.Cards, 3)
	require.Equal(t, []string{"0000:00:02.0", "0000:03:00.0", "accel:261:0"}, []string{s.Cards[0].ID, s.Cards[1].ID, s.Cards[2].ID})

	jf := user(s, "0000:00:02.0", "jellyfin")
	require.NotNil(t, jf)
	require.Equal(t, usage.Names{Namespace: "media", Pod: "jellyfin-0", Container: "jellyfin"}, jf.Names)
	require.Equal(t, usage.Owner{PodUID: podA, ContainerID: ctrA}, jf.Owner)
	require.True(t, jf.Named)
	require.Equal(t, 1, jf.Clients, "one drm-client-id, however many fds and processes")
	require.Equal(t, []usage.Process{{PID: 101, Comm: "ffmpeg"}, {PID: 102, Comm: "ffmpeg-child"}}, jf.Processes)
	require.InDelta(t, 2.0, engine(jf, usage.ClassVideo).BusySeconds, 1e-9)
	require.Equal(t, -1.0, engine(jf, usage.ClassVideo).Busy, "no fraction before two scans")
	require.Contains(t, jf.Memory, usage.MemoryUsage{Region: "system0", Kind: "resident", Bytes: 1 << 20})
	require.Len(t, s.Cards[0].Users, 1, "the pod without a GPU shows nothing")

	host := user(s, "0000:03:00.0", usage.HostLabel)
	require.NotNil(t, host)
	require.True(t, host.Host)
	require.Equal(t, usage.Names{Namespace: usage.HostLabel, Pod: usage.HostLabel, Container: usage.HostLabel}, host.Names)
	require.Equal(t, "xe", s.Cards[1].Driver)
	require.Equal(t, "intel_vpu", s.Cards[2].Driver)
	require.InDelta(t, 5e-9, engine(user(s, "accel:261:0", usage.HostLabel), usage.ClassCompute).BusySeconds, 1e-15)
}

func TestMonitorExitedClientsKeepTheirTime(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	cg := usagetest.CgroupV2Systemd(podA, ctrA)
	require.NoError(t, r.proc.AddProcess(10, "Plex Media Serv", cg))
	var last float64
	check := func(s *usage.Snapshot, want float64) {
		t.Helper()
		u := user(s, "0000:00:02.0", "plex")
		require.NotNil(t, u)
		got := engine(u, usage.ClassVideo).BusySeconds
		require.GreaterOrEqual(t, got, last, "the counter never decreases")
		require.InDelta(t, want, got, 1e-9)
		last = got
	}
	// transcode 1: 3s of video, then exits.
	require.NoError(t, r.proc.AddProcess(11, "Plex Transcoder", cg))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 1e9)))
	check(r.scan(0), 1)
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 3e9)))
	check(r.scan(10*time.Second), 3)
	require.NoError(t, r.proc.Exit(11))
	for range 4 {
		s := r.scan(10 * time.Second)
		check(s, 3)
		require.Zero(t, user(s, "0000:00:02.0", "plex").Clients)
	}
	// transcode 2: a new client, 2s.
	require.NoError(t, r.proc.AddProcess(12, "Plex Transcoder", cg))
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD128", i915(2, 2e9)))
	check(r.scan(10*time.Second), 5)
	// its value goes back for a while (allowed by the kernel), then on.
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD128", i915(2, 1e9)))
	check(r.scan(10*time.Second), 5)
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD128", i915(2, 4e9)))
	check(r.scan(10*time.Second), 7)
	// a process that could not be read for one scan is not counted twice.
	require.NoError(t, os.Rename(filepath.Join(r.proc.Root, "12"), filepath.Join(r.proc.Root, "x12")))
	check(r.scan(10*time.Second), 7)
	require.NoError(t, os.Rename(filepath.Join(r.proc.Root, "x12"), filepath.Join(r.proc.Root, "12")))
	check(r.scan(10*time.Second), 7)
}

func TestMonitorBusyFraction(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 100e9)))
	r.scan(0)
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 105e9)))
	s := r.scan(10 * time.Second)
	require.InDelta(t, 0.5, engine(user(s, "0000:00:02.0", "plex"), usage.ClassVideo).Busy, 1e-9)
	require.Equal(t, 10*time.Second, s.Interval)
}

func TestMonitorCycles(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "ml", "train-0", "train")
	require.NoError(t, r.proc.AddProcess(11, "python3", usagetest.CgroupV1Cgroupfs(podA, ctrA)))
	xe := func(cycles, total uint64) string {
		return usagetest.FDInfo{Driver: "xe", ClientID: 4,
			Cycles: map[string]uint64{"rcs": cycles, "vcs": cycles}, TotalCycles: map[string]uint64{"rcs": total, "vcs": total},
			Capacity: map[string]uint64{"vcs": 2}}.String()
	}
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD129", xe(1000, 10000)))
	s := r.scan(0)
	u := user(s, "0000:03:00.0", "train")
	require.Zero(t, engine(u, usage.ClassRender).BusySeconds, "cycles before the first scan have no wall time")
	require.True(t, engine(u, usage.ClassRender).HasBusy)
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD129", xe(1500, 11000)))
	s = r.scan(10 * time.Second)
	u = user(s, "0000:03:00.0", "train")
	require.InDelta(t, 5.0, engine(u, usage.ClassRender).BusySeconds, 1e-9, "half busy for 10s")
	require.InDelta(t, 0.5, engine(u, usage.ClassRender).Busy, 1e-9)
	require.InDelta(t, 2.5, engine(u, usage.ClassVideo).BusySeconds, 1e-9, "capacity 2 halves it")
	require.Zero(t, engine(u, usage.ClassRender).MaxFreqSeconds, "cycles over total cycles are busy time, not max-frequency time")
	// cycles going back are held; the timestamp moves on.
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD129", xe(1400, 12000)))
	s = r.scan(10 * time.Second)
	require.InDelta(t, 5.0, engine(user(s, "0000:03:00.0", "train"), usage.ClassRender).BusySeconds, 1e-9)
}

func TestMonitorMaxFreqIsNotBusy(t *testing.T) {
	r := newRig(t, time.Hour)
	require.NoError(t, r.proc.AddProcess(11, "glmark2", usagetest.CgroupHost))
	// msm: 2s busy, 600M cycles at a 600 MHz top frequency: 1s at max.
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD130", usagetest.FDInfo{Driver: "msm", ClientID: 1,
		Engines: map[string]uint64{"gpu": 2e9}, Cycles: map[string]uint64{"gpu": 600e6}, MaxFreqHz: map[string]uint64{"gpu": 600e6}}.String()))
	s := r.scan(0)
	require.Equal(t, "226:130", s.Cards[0].ID, "a device discovery does not list is named by its numbers")
	e := engine(user(s, "226:130", usage.HostLabel), usage.ClassRender)
	require.InDelta(t, 2.0, e.BusySeconds, 1e-9)
	require.InDelta(t, 1.0, e.MaxFreqSeconds, 1e-9)
	require.True(t, e.HasBusy)
	require.True(t, e.HasMaxFreq)
}

func TestMonitorIdleAllocation(t *testing.T) {
	r := newRig(t, 30*time.Second)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	require.NoError(t, r.proc.AddProcess(11, "Plex", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 1e9)))
	idle := func(after time.Duration) (bool, float64) {
		u := user(r.scan(after), "0000:00:02.0", "plex")
		return u.Idle, u.IdleSeconds
	}
	i, secs := idle(0)
	require.False(t, i)
	require.Zero(t, secs)
	i, secs = idle(20 * time.Second)
	require.False(t, i)
	require.Equal(t, 20.0, secs)
	i, _ = idle(20 * time.Second)
	require.True(t, i, "holds the card and used no engine for 40s")
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 2e9)))
	i, secs = idle(20 * time.Second)
	require.False(t, i)
	require.Zero(t, secs)
	// without an open client it holds nothing: not an idle allocation.
	require.NoError(t, r.proc.CloseFD(11, 5))
	r.scan(time.Minute)
	r.scan(time.Minute)
	i, _ = idle(time.Minute)
	require.False(t, i)
}

func TestMonitorSeriesGoWithTheirContainer(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	r.container(podB, ctrC, "apps", "other-0", "other")
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 1e9)))
	require.NoError(t, r.proc.AddProcess(12, "ffmpeg", usagetest.CgroupV2Systemd(podB, ctrC)))
	require.NoError(t, r.proc.SetFD(12, 5, "/dev/dri/renderD128", i915(2, 1e9)))
	require.NotNil(t, user(r.scan(0), "0000:00:02.0", "plex"))
	// plex's process exits but the container runs on: its row stays.
	require.NoError(t, r.proc.Exit(11))
	for range 5 {
		require.NotNil(t, user(r.scan(time.Second), "0000:00:02.0", "plex"))
	}
	// the container is deleted: its row goes, the other stays.
	require.NoError(t, os.RemoveAll(filepath.Join(r.bundles, ctrA)))
	s := r.scan(time.Second)
	require.Nil(t, user(s, "0000:00:02.0", "plex"))
	require.NotNil(t, user(s, "0000:00:02.0", "other"))
}

func TestMonitorUnnamedAndUnreadable(t *testing.T) {
	r := newRig(t, time.Hour)
	// no bundle: the row carries the pod UID and container ID.
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 1e9)+"drm-engine-copy: 5 bogus\n"))
	// a process whose fd list cannot be read.
	require.NoError(t, os.MkdirAll(filepath.Join(r.proc.Root, "12"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.proc.Root, "12", "fd"), nil, 0o644))
	// a process whose fd links cannot be read (EACCES without
	// CAP_SYS_PTRACE; here a file that is no link).
	require.NoError(t, r.proc.AddProcess(13, "secret", usagetest.CgroupHost))
	require.NoError(t, os.WriteFile(filepath.Join(r.proc.Root, "13", "fd", "7"), nil, 0o644))
	// entries that are not processes.
	require.NoError(t, os.MkdirAll(filepath.Join(r.proc.Root, "self"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.proc.Root, "uptime"), nil, 0o644))
	s := r.scan(0)
	u := user(s, "0000:00:02.0", ctrA)
	require.NotNil(t, u)
	require.False(t, u.Named)
	require.Equal(t, usage.Names{Namespace: usage.UnknownLabel, Pod: podA, Container: ctrA}, u.Names)
	require.Equal(t, 3, s.Stats.Processes)
	require.Equal(t, 2, s.Stats.Unreadable)
	require.Equal(t, 1, s.Stats.Malformed)
	require.Equal(t, 1, s.Stats.Scans)
}

func TestMonitorProcRootMissing(t *testing.T) {
	m := usage.NewMonitor(usage.Options{ProcRoot: filepath.Join(t.TempDir(), "none")})
	_, err := m.Scan()
	require.Error(t, err)
	require.Nil(t, m.Snapshot())
}

func TestMonitorCapacityAndNewClients(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	withCapacity := func(client uint64, videoNS uint64) string {
		return usagetest.FDInfo{Driver: "i915", ClientID: client, Engines: map[string]uint64{"video": videoNS}, Capacity: map[string]uint64{"video": 2}}.String()
	}
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", withCapacity(1, 4e9)))
	s := r.scan(0)
	require.InDelta(t, 2.0, engine(user(s, "0000:00:02.0", "plex"), usage.ClassVideo).BusySeconds, 1e-9, "two video engines: 4s of engine time is 2s of the pair")
	// a client that appears with 100s of history adds to the counter but
	// not to the busy fraction of this interval.
	require.NoError(t, r.proc.SetFD(11, 6, "/dev/dri/renderD128", withCapacity(2, 200e9)))
	s = r.scan(10 * time.Second)
	e := engine(user(s, "0000:00:02.0", "plex"), usage.ClassVideo)
	require.InDelta(t, 102.0, e.BusySeconds, 1e-9)
	require.InDelta(t, 0.0, e.Busy, 1e-9)
	require.Equal(t, 2, user(s, "0000:00:02.0", "plex").Clients)
}

func TestMonitorPIDReuse(t *testing.T) {
	r := newRig(t, time.Hour)
	r.container(podA, ctrA, "media", "plex-0", "plex")
	r.container(podB, ctrB, "apps", "web-0", "web")
	require.NoError(t, r.proc.AddProcess(11, "ffmpeg", usagetest.CgroupV2Systemd(podA, ctrA)))
	require.NoError(t, r.proc.SetFD(11, 5, "/dev/dri/renderD128", i915(1, 3e9)))
	r.scan(0)
	// pid 11 exits; the kernel hands 11 to a process of another pod,
	// which opens the card: a new client, in its own container's row.
	require.NoError(t, r.proc.Exit(11))
	require.NoError(t, r.proc.AddProcess(11, "node", usagetest.CgroupV1Cgroupfs(podB, ctrB)))
	require.NoError(t, r.proc.SetFD(11, 7, "/dev/dri/renderD128", i915(9, 1e9)))
	for range 4 {
		s := r.scan(time.Second)
		require.InDelta(t, 3.0, engine(user(s, "0000:00:02.0", "plex"), usage.ClassVideo).BusySeconds, 1e-9)
		require.Zero(t, user(s, "0000:00:02.0", "plex").Clients)
		require.InDelta(t, 1.0, engine(user(s, "0000:00:02.0", "web"), usage.ClassVideo).BusySeconds, 1e-9)
		require.Equal(t, 1, user(s, "0000:00:02.0", "web").Clients)
	}
}

// TestReaderManyFDs reads a process with 10,000 fds, one of them a DRM
// client.
func TestReaderManyFDs(t *testing.T) {
	r := newRig(t, time.Hour)
	require.NoError(t, r.proc.AddProcess(11, "busy", usagetest.CgroupHost))
	for fd := range 10_000 {
		require.NoError(t, os.Symlink(fmt.Sprintf("socket:[%d]", 1000+fd), filepath.Join(r.proc.Root, "11", "fd", strconv.Itoa(fd))))
	}
	require.NoError(t, r.proc.SetFD(11, 10_000, "/dev/dri/renderD128", i915(1, 1e9)))
	s := r.scan(0)
	require.Equal(t, 1, user(s, "0000:00:02.0", usage.HostLabel).Clients)
	require.Zero(t, s.Stats.Unreadable)
}
