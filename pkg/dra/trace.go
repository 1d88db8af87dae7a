package dra

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// startTrace logs how long the plugin took from its process's start to
// each step of its startup (debug level), and the whole once the first
// slice is published (info): the breakdown of docs/performance.md.
type startTrace struct {
	start time.Time
	log   *logrus.Entry
	mu    sync.Mutex
	last  time.Time
	done  map[string]bool
}

func newStartTrace(log *logrus.Entry) *startTrace {
	now := time.Now()
	return &startTrace{start: processStart(now), log: log, last: now, done: map[string]bool{}}
}

// processStart is when this process was started: its start time in
// /proc/self/stat (clock ticks since boot, 10 ms) against CLOCK_BOOTTIME,
// the same clock; now when that cannot be read.
func processStart(now time.Time) time.Time {
	stat, err := os.ReadFile("/proc/self/stat")
	var ts unix.Timespec
	if err != nil || unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) != nil {
		return now
	}
	// The fields after the command (which may hold spaces) start after
	// the last ')'; starttime is field 22, the 20th after it.
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return now
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return now
	}
	const clockTicks = 100 // USER_HZ on Linux
	age := time.Duration(ts.Nano()) - time.Duration(ticks)*(time.Second/clockTicks)
	if age < 0 || age > time.Hour {
		return now
	}
	return now.Add(-age)
}

// mark logs the first time step is reached: the time since the process
// started and since the previous step.
func (t *startTrace) mark(step string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done[step] {
		return
	}
	t.done[step] = true
	now := time.Now()
	t.log.WithFields(logrus.Fields{"step": step, "sinceStartMs": ms(now.Sub(t.start)), "stepMs": ms(now.Sub(t.last))}).Debug("startup step")
	t.last = now
}

// since is the time from the process's start.
func (t *startTrace) since() time.Duration { return time.Since(t.start) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// registrationMethod is the kubelet's call that ends a registration.
const registrationMethod = "/pluginregistration.Registration/NotifyRegistrationStatus"

// timing is the gRPC interceptor of the registration and DRA servers:
// it marks the registration in the trace and logs each DRA call's time
// in the plugin (debug), which includes the GET of each claim;
// PrepareResourceClaims logs the part after it (claim store, checkpoint).
func (t *startTrace) timing(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	if info.FullMethod == registrationMethod {
		t.mark("registered with the kubelet")
	} else if t.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		t.log.WithFields(logrus.Fields{"method": info.FullMethod, "us": time.Since(start).Microseconds()}).Debug("gRPC call")
	}
	return resp, err
}
