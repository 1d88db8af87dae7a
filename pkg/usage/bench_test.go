package usage_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
	"github.com/dri-cdi/dri-cdi/pkg/usage/usagetest"
)

// BenchmarkScan is one scan of a node with 200 processes, 50 of which
// hold a DRM client, each process with 20 other fds (files, sockets):
// the cost the agent pays per --usage-interval.
func BenchmarkScan(b *testing.B) {
	dir := b.TempDir()
	p, err := usagetest.New(filepath.Join(dir, "proc"))
	require.NoError(b, err)
	for pid := 1; pid <= 200; pid++ {
		pod := fmt.Sprintf("%08x-1111-2222-3333-444455556666", pid%25)
		ctr := fmt.Sprintf("%064x", pid%25)
		require.NoError(b, p.AddProcess(pid, "proc", usagetest.CgroupV2Systemd(pod, ctr)))
		for fd := range 20 {
			target := fmt.Sprintf("socket:[%d]", pid*100+fd)
			if fd%2 == 0 {
				target = fmt.Sprintf("/var/lib/app/file%d", fd)
			}
			require.NoError(b, p.SetFD(pid, fd, target, "pos:\t0\nflags:\t02\n"))
		}
		if pid%4 == 0 {
			require.NoError(b, p.SetFD(pid, 20, "/dev/dri/renderD128", i915(uint64(pid), uint64(pid)*1e6)))
		}
	}
	m := usage.NewMonitor(usage.Options{ProcRoot: p.Root, Cards: func() ([]drm.Card, error) { return testCards, nil }})
	usage.FakeMonitor(m, time.Now)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Scan(); err != nil {
			b.Fatal(err)
		}
	}
}
