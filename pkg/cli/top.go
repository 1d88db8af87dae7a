package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dri-cdi/dri-cdi/pkg/drm"
	"github.com/dri-cdi/dri-cdi/pkg/usage"
)

func topCommand() *Command {
	return &Command{Name: "top", Summary: "Show what each pod and container does with each GPU", Run: runTop}
}

const topHelp = `Shows, per card, each container (and the host) that holds the card open:
busy % of each engine class (render, video, video-enhance, copy, compute,
other) over the last interval, memory, open DRM clients, how long it has
not used the card, and its processes. A video engine busy in a media
server's row means it transcodes on the GPU.

The figures are the DRM usage stats the kernel writes into
/proc/<pid>/fdinfo of every open DRM file; containers are named from
containerd's bundle annotations. Run it on the node as root (reading
another user's fdinfo needs CAP_SYS_PTRACE), or in a debug pod with the
host's /proc, /sys, /dev and bundle dir mounted and the flags pointing at
them. It refreshes every -interval until interrupted; -once prints one
view after one interval, for scripts with -o json.

Where nobody may run a pod with the host's /proc, -metrics-url reads the
same figures from a running agent's /metrics (with --usage on) instead,
for example through the API server with kubectl proxy:

  kubectl proxy &
  dri-cdi top -interval 30s -metrics-url \
    http://127.0.0.1:8001/api/v1/namespaces/dri-cdi/pods/<agent pod>:9470/proxy/metrics

Busy % is then over the agent's scans between two reads (set -interval
longer than its --usage-interval), and processes are not shown. Pointed at
dri-cdi-dra's /metrics (port 9472) on a DRA node, each row also shows the
ResourceClaim through which the container holds the card (CLAIM) and what
the claim was promised of it (PROMISED: its shares of a shared card, as a
part of the card's engine time, next to the busy % it really uses).`

func runTop(ctx context.Context, env *Env, args []string) error {
	f := newFlags("dri-cdi top", "[flags]", topHelp)
	var roots rootFlags
	roots.register(f)
	procRoot := f.String("proc-root", usage.DefaultProcRoot, "proc tree to read processes from")
	bundleDir := f.String("bundle-dir", usage.DefaultBundleDir, "containerd's bundle dir of the k8s.io namespace, to name containers")
	interval := f.Duration("interval", 2*time.Second, "time between refreshes; busy % is over it")
	once := f.Bool("once", false, "print one view after one interval and exit")
	metricsURL := f.String("metrics-url", "", "read a running agent's /metrics at this http(s) URL instead of this node's /proc")
	output := f.output("text", "json")
	f.finish()
	if err := f.parse(env, args, false); err != nil {
		return err
	}
	if *interval <= 0 {
		return &usageError{msg: "-interval must be positive", usage: f.usage()}
	}
	r := roots.roots()
	var scan func() (*usage.Snapshot, error)
	if *metricsURL != "" {
		scan = metricsScanner(ctx, *metricsURL)
	} else {
		scan = procScanner(env, r, *procRoot, *bundleDir)
	}
	if _, err := scan(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			if *once {
				return ctx.Err()
			}
			return nil
		case <-time.After(*interval):
		}
		snap, err := scan()
		if err != nil {
			return err
		}
		if err := printTop(env, snap, *output, *once); err != nil {
			return err
		}
		if *once {
			return nil
		}
	}
}

// procScanner scans the proc tree at procRoot.
func procScanner(env *Env, r drm.Roots, procRoot, bundleDir string) func() (*usage.Snapshot, error) {
	m := usage.NewMonitor(usage.Options{
		ProcRoot: procRoot,
		Cards: func() ([]drm.Card, error) {
			inv, err := drm.Discover(r)
			if err != nil {
				return nil, err
			}
			return inv.Cards, nil
		},
		Namer: usage.NewBundleNamer(bundleDir),
		Log:   env.Log,
	})
	return m.Scan
}

// metricsScanner reads a daemon's /metrics at url; each read's busy
// fractions come from the previous read.
func metricsScanner(ctx context.Context, url string) func() (*usage.Snapshot, error) {
	client := &http.Client{Timeout: 30 * time.Second}
	var prev *usage.Snapshot
	return func() (*usage.Snapshot, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("metrics URL %q: %w", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("read metrics: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("read metrics %s: %s", url, resp.Status)
		}
		snap, err := usage.ParseMetrics(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", url, err)
		}
		usage.Busy(prev, snap)
		prev = snap
		return snap, nil
	}
}

// printTop prints one view in the -output format.
func printTop(env *Env, snap *usage.Snapshot, output string, once bool) error {
	if output == "json" {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(snap)
	}
	if !once {
		// Home and clear: a plain ANSI terminal is all a refreshing
		// table needs.
		fmt.Fprint(env.Stdout, "\x1b[H\x1b[2J")
	}
	return writeTop(env.Stdout, snap)
}

// writeTop prints one view: a header per card, a row per container.
func writeTop(w io.Writer, s *usage.Snapshot) error {
	fmt.Fprintf(w, "dri-cdi top  %s  interval %s  processes %d", s.Time.Format(time.TimeOnly), s.Interval.Round(time.Millisecond), s.Stats.Processes)
	if s.Stats.Unreadable > 0 {
		fmt.Fprintf(w, "  unreadable %d (run as root with CAP_SYS_PTRACE)", s.Stats.Unreadable)
	}
	fmt.Fprintln(w)
	if len(s.Cards) == 0 {
		fmt.Fprintln(w, "\nno process holds a DRM card open")
		return nil
	}
	for _, c := range s.Cards {
		fmt.Fprintf(w, "\nCARD %s (%s)\n", c.ID, orDash(c.Driver))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		claims := slices.ContainsFunc(c.Users, func(u usage.ContainerUsage) bool { return len(u.Claims) > 0 })
		head := "NAMESPACE\tPOD\tCONTAINER\t"
		if claims {
			head += "CLAIM\tPROMISED\t"
		}
		fmt.Fprintln(tw, head+"CLIENTS\tRENDER\tVIDEO\tVIDEO-ENH\tCOPY\tCOMPUTE\tOTHER\tMEMORY\tIDLE\tPROCESSES")
		for _, u := range c.Users {
			ns, pod, ctr := u.Namespace, u.Pod, u.Container
			if u.Host {
				pod, ctr = "-", "-"
			}
			row := []string{orDash(ns), orDash(pod), orDash(ctr)}
			if claims {
				row = append(row, claimCells(u)...)
			}
			row = append(row, fmt.Sprint(u.Clients))
			for _, class := range usage.Classes {
				row = append(row, busyCell(u, class))
			}
			row = append(row, memoryCell(u), idleCell(u), processCell(u))
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// claimCells are a row's DRA claims of the card ("<namespace>/<name>")
// and what they were promised of it: "50% (1/2)" for one share of two,
// "100%" for the card whole, "0% (admin)" for admin access, "?" for a
// share whose card's shares are not known; then the device memory the
// share was promised, where it was ("50% (1/2) 2.0GiB").
func claimCells(u usage.ContainerUsage) []string {
	var names, promised []string
	for _, c := range u.Claims {
		names = append(names, c.Namespace+"/"+c.Name)
		r, ok := c.Promised()
		switch {
		case !ok:
			promised = append(promised, "?")
		case c.Admin:
			promised = append(promised, "0% (admin)")
		case c.ShareID != "":
			promised = append(promised, fmt.Sprintf("%.0f%% (%d/%d)", r*100, c.Shares, c.CardShares))
		default:
			promised = append(promised, fmt.Sprintf("%.0f%%", r*100))
		}
		if c.Memory > 0 {
			promised[len(promised)-1] += " " + humanBytes(uint64(c.Memory))
		}
	}
	return []string{orDash(strings.Join(names, ",")), orDash(strings.Join(promised, ","))}
}

// busyCell is the busy % of a class: "-" when the card has no such
// engine for this container, "?" before two scans.
func busyCell(u usage.ContainerUsage, class string) string {
	for _, e := range u.Engines {
		if e.Class != class {
			continue
		}
		if !e.HasBusy || e.Busy < 0 {
			return "?"
		}
		return fmt.Sprintf("%.0f%%", e.Busy*100)
	}
	return "-"
}

// memoryCell is the resident memory over all regions (total when the
// driver gives no resident figure).
func memoryCell(u usage.ContainerUsage) string {
	var resident, total uint64
	var hasResident bool
	for _, m := range u.Memory {
		switch m.Kind {
		case usage.KindResident:
			resident += m.Bytes
			hasResident = true
		case usage.KindTotal:
			total += m.Bytes
		}
	}
	if !hasResident {
		resident = total
	}
	if len(u.Memory) == 0 {
		return "-"
	}
	return humanBytes(resident)
}

func humanBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.0fKiB", float64(b)/(1<<10))
	}
}

func idleCell(u usage.ContainerUsage) string {
	if u.Clients == 0 {
		return "closed"
	}
	d := time.Duration(u.IdleSeconds * float64(time.Second)).Round(time.Second)
	if u.Idle {
		return d.String() + "!"
	}
	return d.String()
}

func processCell(u usage.ContainerUsage) string {
	var parts []string
	for i, p := range u.Processes {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("+%d", len(u.Processes)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s(%d)", p.Comm, p.PID))
	}
	return orDash(strings.Join(parts, " "))
}
