package gctune

import (
	"runtime/debug"
	"testing"
)

func TestApplyDefault(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	if got := apply(func(string) (string, bool) { return "", false }); got != DefaultGCPercent {
		t.Fatalf("apply() = %d, want %d", got, DefaultGCPercent)
	}
	if cur := debug.SetGCPercent(100); cur != DefaultGCPercent {
		t.Fatalf("GC percent after apply is %d, want %d", cur, DefaultGCPercent)
	}
}

func TestApplyKeepsGOGC(t *testing.T) {
	prev := debug.SetGCPercent(200)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	if got := apply(func(k string) (string, bool) { return "200", k == "GOGC" }); got != 200 {
		t.Fatalf("apply() with GOGC set = %d, want 200", got)
	}
	if cur := debug.SetGCPercent(100); cur != 200 {
		t.Fatalf("GC percent after apply with GOGC set is %d, want 200 (left alone)", cur)
	}
}
