package deviceplugin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

// BenchmarkAllocate measures Allocate of one device over the real gRPC
// connection the kubelet uses, with 16 cards, and reports the p99.
func BenchmarkAllocate(b *testing.B) {
	for _, mode := range []Delivery{DeliveryCDICRI, DeliveryNRI, DeliveryDeviceSpecs} {
		b.Run(string(mode), func(b *testing.B) {
			e := startLogged(b, mode, true, quietLog())
			m, k, ctx := e.m, e.k, context.Background()

			cards := make([]drm.Card, 16)
			for i := range cards {
				cards[i] = testCard(fmt.Sprintf("0000:%02x:00.0", i+1), uint32(i), i%2)
			}
			require.NoError(b, m.Update([]config.Pool{pool(res, 1, cards...)}, nil))
			require.Eventually(b, func() bool { e := k.Endpoint(res); return e != nil && e.Updates() > 0 }, wait, tick)
			client := k.Endpoint(res).Client

			lat := make([]time.Duration, 0, 1<<16)
			i := 0
			b.ResetTimer()
			for b.Loop() {
				req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{cards[i%16].ID}}}}
				t0 := time.Now()
				if _, err := client.Allocate(ctx, req); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				i++
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkPreferred measures GetPreferredAllocation's choice for 2 of
// 64 devices (16 cards x 4 replicas), without gRPC.
func BenchmarkPreferred(b *testing.B) {
	cards := make([]drm.Card, 16)
	for i := range cards {
		cards[i] = testCard(fmt.Sprintf("0000:%02x:00.0", i+1), uint32(i), i%2)
	}
	st := buildState(pool(res, 4, cards...), nil, DeliveryCDICRI, testName)
	available := ids(st.list.Devices)
	for b.Loop() {
		if got := st.preferred(available, nil, 2); len(got) != 2 {
			b.Fatal(got)
		}
	}
}

// BenchmarkAllocateHandler measures the Allocate handler alone, without
// gRPC: the plugin's own share of the latency.
func BenchmarkAllocateHandler(b *testing.B) {
	cards := make([]drm.Card, 16)
	for i := range cards {
		cards[i] = testCard(fmt.Sprintf("0000:%02x:00.0", i+1), uint32(i), i%2)
	}
	p := &plugin{resource: res, delivery: DeliveryCDICRI, log: logrus.NewEntry(logrus.New()), metrics: NewMetrics(metrics.NewAgent("bench"))}
	p.setState(buildState(pool(res, 1, cards...), nil, DeliveryCDICRI, testName))
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{cards[3].ID, cards[7].ID}}}}
	for b.Loop() {
		if _, err := p.Allocate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKubeletRestart measures the time from a kubelet restart
// (every socket deleted, kubelet.sock served anew) to the kubelet
// receiving the device list again over a new registration.
func BenchmarkKubeletRestart(b *testing.B) {
	e := startLogged(b, DeliveryCDICRI, true, quietLog())
	m, k := e.m, e.k
	require.NoError(b, m.Update([]config.Pool{pool(res, 1, testCard("0000:03:00.0", 0, 0))}, nil))
	require.Eventually(b, func() bool { e := k.Endpoint(res); return e != nil && e.Updates() > 0 }, wait, tick)

	var lat []time.Duration
	for b.Loop() {
		n := k.RegistrationsOf(res)
		t0 := time.Now()
		require.NoError(b, k.Restart(false))
		for {
			if e := k.Endpoint(res); k.RegistrationsOf(res) > n && e != nil && e.Updates() > 0 {
				break
			}
			if time.Since(t0) > wait {
				b.Fatal("no re-registration")
			}
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// quietLog logs only errors.
func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return logrus.NewEntry(l)
}
