package deviceplugin

import (
	"context"
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/dri-cdi/dri-cdi/pkg/config"
	"github.com/dri-cdi/dri-cdi/pkg/deviceplugin/kubelettest"
	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/metrics"
)

func benchCards(n int) []drm.Card {
	cards := make([]drm.Card, n)
	for i := range cards {
		cards[i] = testCard(fmt.Sprintf("0000:%02x:00.0", i+1), uint32(i), i%2)
	}
	return cards
}

// BenchmarkAllocateState is Allocate's work without gRPC: one device of a
// pool of 16 cards, cdi-cri delivery.
func BenchmarkAllocateState(b *testing.B) {
	cards := benchCards(16)
	st := buildState(config.Pool{Resource: res, Replicas: 1, Cards: cards}, nil, DeliveryCDICRI, testName)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := st.allocate([]string{cards[i%len(cards)].ID}, DeliveryCDICRI); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllocate is Allocate of one device over the plugin's unix
// socket, as the kubelet calls it at pod admission, from the connection
// the (fake) kubelet dialed at registration.
func BenchmarkAllocate(b *testing.B) {
	dir := shortDir(b)
	k, err := kubelettest.Start(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(k.Stop)
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	m, err := NewManager(Options{KubeletDir: dir, Delivery: DeliveryCDICRI, Name: testName,
		Log: logrus.NewEntry(log), Metrics: metrics.NewAgent("bench")})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	cards := benchCards(16)
	if err := m.Update([]config.Pool{pool(res, 1, cards...)}, nil); err != nil {
		b.Fatal(err)
	}
	e := (&env{k: k}).endpoint(b, res, 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{cards[i%len(cards)].ID}}}}
		if _, err := e.Client.Allocate(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
