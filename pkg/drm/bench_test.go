package drm_test

import (
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/drm/drmtest"
)

func benchmarkDiscover(b *testing.B, gpus []drmtest.GPU) {
	drmtest.SkipUnlessRoot(b)
	tree := drmtest.MustBuild(b, gpus...)
	roots := tree.Roots()
	b.ReportAllocs()
	for b.Loop() {
		inv, err := drm.Discover(roots)
		if err != nil {
			b.Fatal(err)
		}
		if len(inv.Cards) != len(gpus) || len(inv.Skipped) != 0 {
			b.Fatalf("found %d cards, skipped %v; want %d cards", len(inv.Cards), inv.Skipped, len(gpus))
		}
	}
}

// BenchmarkDiscover16 scans a node with 16 mixed GPUs (xe, i915, amdgpu
// with kfd, virtio-gpu).
func BenchmarkDiscover16(b *testing.B) { benchmarkDiscover(b, drmtest.Mixed(16)) }

// BenchmarkDiscover128 scans a node with 128 mixed GPUs.
func BenchmarkDiscover128(b *testing.B) { benchmarkDiscover(b, drmtest.Bench128()) }
