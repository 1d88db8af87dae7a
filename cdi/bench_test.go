package cdi

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
)

// BenchmarkGenerateAndWrite16 and BenchmarkGenerateAndWrite128 measure
// spec generation plus the writer for 16 and 128 cards:
//
//   - write: every file is new (a fresh directory per iteration), so every
//     file is encoded, validated, written, fsynced and renamed;
//   - one-card-changed: the steady state after a hotplug: one card's
//     nodes change, so its file and the "all" file are rewritten and the
//     rest is compared and left alone;
//   - unchanged: a resync that finds nothing to do.
//
// Set DRI_CDI_BENCH_DIR to benchmark on a particular filesystem (the
// agent's default, /var/run/cdi, is usually a tmpfs).
func BenchmarkGenerateAndWrite16(b *testing.B)  { benchmarkGenerateAndWrite(b, 16) }
func BenchmarkGenerateAndWrite128(b *testing.B) { benchmarkGenerateAndWrite(b, 128) }

func benchmarkGenerateAndWrite(b *testing.B, n int) {
	base := os.Getenv("DRI_CDI_BENCH_DIR")
	tmp, err := os.MkdirTemp(base, "dc-bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(tmp) })
	cards := manyCards(n)

	b.Run("write", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			w, err := NewWriter(filepath.Join(tmp, "write", itoa(i)), DefaultKind)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := w.Sync(cards); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("one-card-changed", func(b *testing.B) {
		w, err := NewWriter(filepath.Join(tmp, "changed"), DefaultKind)
		if err != nil {
			b.Fatal(err)
		}
		alt := append([]drm.Card(nil), cards...)
		alt[0] = i915(cards[0].ID, n+1, 128+n+1)
		sets := [2][]drm.Card{cards, alt}
		i := 0
		for b.Loop() {
			i++
			changed, err := w.Sync(sets[i%2])
			if err != nil || !changed {
				b.Fatal(changed, err)
			}
		}
	})

	b.Run("unchanged", func(b *testing.B) {
		w, err := NewWriter(filepath.Join(tmp, "unchanged"), DefaultKind)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Sync(cards); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			changed, err := w.Sync(cards)
			if err != nil || changed {
				b.Fatal(changed, err)
			}
		}
	})
}

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}
