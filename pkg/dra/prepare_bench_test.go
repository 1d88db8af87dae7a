package dra

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/dri-cdi/dri-cdi/pkg/draapi"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/ptr"

	"github.com/dri-cdi/dri-cdi/cdi"
)

// benchDriver is newDriver for a benchmark: logs at info level, as
// deployed, discarded; the checkpoint in dir (a real file system: each
// new claim is an fsynced write).
func benchDriver(b *testing.B, dir string) *Driver {
	b.Helper()
	log := logrus.New()
	log.SetOutput(io.Discard)
	d, err := NewDriver(Options{NodeName: node, Kind: cdi.DefaultKind, SysfsRoot: b.TempDir(),
		PluginDataDir: dir, API: apiOf(fakeClient()), Log: logrus.NewEntry(log)})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Update(testPools(), nil); err != nil {
		b.Fatal(err)
	}
	return d
}

// BenchmarkPrepare is PrepareResourceClaims of one claim in process,
// without gRPC and the claim's GET: "again" is a claim prepared before
// (10 claims in the checkpoint, the file unchanged: a read of it and a
// lookup), "new" a claim not seen before, prepared and then unprepared
// (two fsynced checkpoint writes per iteration).
func BenchmarkPrepare(b *testing.B) {
	ctx := context.Background()
	b.Run("again", func(b *testing.B) {
		d := benchDriver(b, b.TempDir())
		var claims []*draapi.ResourceClaim
		for i := range 10 {
			// Admin access: monitoring claims may share the card.
			r := result("gpu", "pci-0000-00-02-0")
			r.AdminAccess = ptr.To(true)
			c := allocated(fmt.Sprintf("monitor-%d", i), fmt.Sprintf("uid-%d", i), r)
			claims = append(claims, c)
		}
		if _, err := d.PrepareResourceClaims(ctx, claims); err != nil {
			b.Fatal(err)
		}
		one := claims[3:4]
		b.ReportAllocs()
		for b.Loop() {
			got, err := d.PrepareResourceClaims(ctx, one)
			if err != nil || got[one[0].UID].Err != nil {
				b.Fatal(err, got)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		d := benchDriver(b, b.TempDir())
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			c := allocated("c", fmt.Sprintf("uid-%d", i), result("gpu", "pci-0000-00-02-0"))
			got, err := d.PrepareResourceClaims(ctx, []*draapi.ResourceClaim{c})
			if err != nil || got[c.UID].Err != nil {
				b.Fatal(err, got)
			}
			if _, err := d.UnprepareResourceClaims(ctx, []ClaimRef{ref(c)}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
