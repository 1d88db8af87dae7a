package deviceplugin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/agent"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

// BenchmarkHotplugToListAndWatch measures the time from a card appearing
// in the dev and sysfs trees (drmtest.Tree.Add) to the kubelet receiving
// a device list that holds it, on a node with 16 cards, with the default
// debounce. It reports the p50, p99 and maximum, and the process RSS.
func BenchmarkHotplugToListAndWatch(b *testing.B) {
	drmtest.SkipUnlessRoot(b)
	gpus := drmtest.ManyIntel(17)
	tree, err := drmtest.NewTree(b.TempDir(), gpus[:16]...)
	require.NoError(b, err)
	k, err := kubelettest.Start(kubelettest.ShortDir(b))
	require.NoError(b, err)
	defer k.Stop()
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- deviceplugin.Run(ctx, deviceplugin.RunOptions{
			Agent:   agent.Options{Roots: tree.Roots(), CDIDir: tmpfsDir(b), ResyncInterval: time.Hour, Log: logrus.NewEntry(l)},
			Backend: deviceplugin.BackendOptions{KubeletDir: k.Dir(), Delivery: "cdi-cri"},
		})
	}()
	defer func() { cancel(); <-done }()
	require.Eventually(b, func() bool { e := k.Endpoint("dri-cdi.dev/xe"); return e != nil && len(e.Devices()) == 16 }, wait, tick)
	ep := k.Endpoint("dri-cdi.dev/xe")

	has := func(want bool) func([]*pluginapi.Device) bool {
		return func(devs []*pluginapi.Device) bool {
			return slices.ContainsFunc(devs, func(d *pluginapi.Device) bool { return d.ID == gpus[16].ID() }) == want
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Minute)
	defer wcancel()
	var lat []time.Duration
	var add time.Duration
	for b.Loop() {
		t0 := time.Now()
		require.NoError(b, tree.Add(gpus[16]))
		add += time.Since(t0)
		require.NoError(b, ep.WaitFor(wctx, has(true)))
		lat = append(lat, time.Since(t0))
		b.StopTimer()
		require.NoError(b, tree.Remove(gpus[16].ID()))
		require.NoError(b, ep.WaitFor(wctx, has(false)))
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(add.Microseconds())/1000/float64(len(lat)), "tree-add-ms")
	if rss, err := vmRSS(); err == nil {
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	}
}

// tmpfsDir returns a temporary directory on tmpfs when there is one, as
// /var/run/cdi is on a real node (fsync costs nothing there), else on
// the test's temp dir.
func tmpfsDir(b *testing.B) string {
	dir, err := os.MkdirTemp("/dev/shm", "dc")
	if err != nil {
		return filepath.Join(b.TempDir(), "cdi")
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// vmRSS reads the resident set size of this process (the agent plus the
// benchmark's fake kubelet and tree) from /proc.
func vmRSS() (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}
