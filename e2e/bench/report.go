package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// Goal is the target of one key.
type Goal struct {
	// Op is "<", "<=", or "~" (Value ± Tolerance); "" means no goal.
	Op        string
	Value     float64
	Tolerance float64
}

// Met reports whether v meets the goal; a key without a goal always does.
func (g Goal) Met(v float64) bool {
	switch g.Op {
	case "<":
		return v < g.Value
	case "<=":
		return v <= g.Value
	case "~":
		return math.Abs(v-g.Value) <= g.Tolerance
	default:
		return true
	}
}

func (g Goal) String() string {
	switch g.Op {
	case "":
		return "-"
	case "~":
		return fmt.Sprintf("%g ± %g", g.Value, g.Tolerance)
	default:
		return fmt.Sprintf("%s %g", g.Op, g.Value)
	}
}

// KeySpec describes one key of bench.json.
type KeySpec struct {
	Name string
	// Unit of the value: ratio, us, ms, MiB or % (of one core).
	Unit string
	// Stat says which statistic the value is.
	Stat string
	Goal Goal
}

// Keys are the keys every complete run reports, in table order.
var Keys = []KeySpec{
	{Name: "nri_create_ratio", Unit: "ratio", Stat: "median with / without dri-cdi-nri", Goal: Goal{Op: "<=", Value: 1.03}},
	{Name: "nri_cdi_vs_nri_ratio", Unit: "ratio", Stat: "median runtime CDI / dri-cdi-nri", Goal: Goal{Op: "~", Value: 1, Tolerance: 0.05}},
	{Name: "nri_verify_cdi_ratio", Unit: "ratio", Stat: "median with / without dri-cdi-nri", Goal: Goal{Op: "<=", Value: 1.02}},
	{Name: "nri_inject_ratio", Unit: "ratio", Stat: "median with / without dri-cdi-nri", Goal: Goal{Op: "<=", Value: 1.02}},
	{Name: "nri_burst_plain_ratio", Unit: "ratio", Stat: "median with / without dri-cdi-nri", Goal: Goal{Op: "<=", Value: 1.05}},
	{Name: "nri_handler_p99_us_plain", Unit: "us", Stat: "p99", Goal: Goal{Op: "<", Value: 50}},
	{Name: "nri_handler_p99_us_gpu", Unit: "us", Stat: "p99", Goal: Goal{Op: "<", Value: 500}},
	{Name: "podresources_p99_us", Unit: "us", Stat: "p99"},
	{Name: "allocate_p99_us", Unit: "us", Stat: "p99", Goal: Goal{Op: "<", Value: 200}},
	{Name: "dra_prepare_p99_us", Unit: "us", Stat: "p99", Goal: Goal{Op: "<", Value: 5000}},
	{Name: "dra_prepare_vs_allocate_ratio", Unit: "ratio", Stat: "p99 / p99"},
	{Name: "dra_prepare_shared_p99_us", Unit: "us", Stat: "p99", Goal: Goal{Op: "<", Value: 5000}},
	{Name: "dra_prepare_shared_vs_exclusive_ratio", Unit: "ratio", Stat: "p99 / p99", Goal: Goal{Op: "<=", Value: 1.5}},
	{Name: "scan_write_ms_16", Unit: "ms", Stat: "median", Goal: Goal{Op: "<", Value: 20}},
	{Name: "scan_write_ms_128", Unit: "ms", Stat: "median"},
	{Name: "scan_write_growth_128", Unit: "ratio", Stat: "scan_write_ms_128 / scan_write_ms_16", Goal: Goal{Op: "<=", Value: 8}},
	{Name: "scan_resync_ms_16", Unit: "ms", Stat: "median", Goal: Goal{Op: "<", Value: 1}},
	{Name: "usage_scan_cpu_pct", Unit: "%", Stat: "usage_scan_cpu_ms / 15 s", Goal: Goal{Op: "<=", Value: 0.25}},
	{Name: "usage_scan_cpu_ms", Unit: "ms", Stat: "median"},
	{Name: "usage_scan_ms", Unit: "ms", Stat: "median"},
	{Name: "agent_usage_rss_mb", Unit: "MiB", Stat: "VmRSS"},
	{Name: "agent_usage_off_rss_mb", Unit: "MiB", Stat: "VmRSS"},
	{Name: "agent_usage_rss_delta_mb", Unit: "MiB", Stat: "VmRSS with - without --usage", Goal: Goal{Op: "<=", Value: 4}},
	{Name: "hotplug_ms", Unit: "ms", Stat: "median", Goal: Goal{Op: "<", Value: 250}},
	{Name: "agent_cold_start_ms", Unit: "ms", Stat: "median", Goal: Goal{Op: "<", Value: 250}},
	{Name: "dra_start_to_slice_ms", Unit: "ms", Stat: "median", Goal: Goal{Op: "<", Value: 600}},
	{Name: "kubelet_restart_reregister_ms", Unit: "ms", Stat: "median", Goal: Goal{Op: "<", Value: 1000}},
	{Name: "agent_rss_mb", Unit: "MiB", Stat: "VmRSS", Goal: Goal{Op: "<=", Value: 15}},
	{Name: "nri_rss_mb", Unit: "MiB", Stat: "VmRSS", Goal: Goal{Op: "<=", Value: 12}},
	{Name: "dra_rss_mb", Unit: "MiB", Stat: "VmRSS", Goal: Goal{Op: "<=", Value: 25}},
	{Name: "dra_pod_start_ratio", Unit: "ratio", Stat: "median DRA / device plugin", Goal: Goal{Op: "<=", Value: 1.25}},
	{Name: "dra_prepare_kubelet_p50_us", Unit: "us", Stat: "median", Goal: Goal{Op: "<", Value: 2000}},
	{Name: "dra_prepare_kubelet_p99_us", Unit: "us", Stat: "p99"},
	{Name: "dra_schedule_shared_p50_us", Unit: "us", Stat: "median"},
	{Name: "dra_schedule_exclusive_p50_us", Unit: "us", Stat: "median"},
	{Name: "dra_schedule_shared_vs_exclusive_ratio", Unit: "ratio", Stat: "median shared / exclusive", Goal: Goal{Op: "<=", Value: 1.5}},
}

// Result is one measured key.
type Result struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	Stat  string  `json:"stat"`
	Goal  string  `json:"goal"`
	// Status is PASS or MISS for keys with a goal, INFO otherwise.
	Status string `json:"status"`
	// Sample is the sample the value comes from, in Unit.
	Sample *Summary `json:"sample,omitempty"`
	// Parts are the samples a ratio compares, in their own units.
	Parts map[string]Summary `json:"parts,omitempty"`
	// CI95 is the 95% bootstrap interval of a ratio.
	CI95 *[2]float64 `json:"ci95,omitempty"`
	// Samples are the raw samples a ratio compares, by part.
	Samples map[string][]float64 `json:"samples,omitempty"`
	// Note says how the value was taken.
	Note string `json:"note,omitempty"`
}

// Report collects the results and failures of one run.
type Report struct {
	Params   Params
	results  map[string]Result
	order    []string
	failures []string
	skipped  map[string]string
}

// NewReport returns an empty report.
func NewReport() *Report { return &Report{results: map[string]Result{}, skipped: map[string]string{}} }

// Skip records that keys were left out on purpose, and why; they are not
// failures.
func (r *Report) Skip(why string, keys ...string) {
	for _, k := range keys {
		r.skipped[k] = why
	}
}

func specOf(key string) (KeySpec, bool) {
	for _, k := range Keys {
		if k.Name == key {
			return k, true
		}
	}
	return KeySpec{}, false
}

// Set records a key. For keys of Keys the unit, statistic and goal come
// from there; any other key is informational and takes them from r.
func (r *Report) Set(key string, res Result) {
	if spec, ok := specOf(key); ok {
		res.Unit, res.Stat = spec.Unit, spec.Stat
		res.Goal = spec.Goal.String()
		res.Status = "INFO"
		if spec.Goal.Op != "" {
			res.Status = "MISS"
			// A ratio meets its goal only when its whole 95 % interval
			// does: a value inside the goal with an interval reaching
			// out of it is within the noise of the run.
			met := spec.Goal.Met(res.Value)
			if res.CI95 != nil {
				met = met && spec.Goal.Met(res.CI95[0]) && spec.Goal.Met(res.CI95[1])
			}
			if met {
				res.Status = "PASS"
			}
		}
	} else {
		res.Goal, res.Status = "-", "INFO"
	}
	if _, ok := r.results[key]; !ok {
		r.order = append(r.order, key)
	}
	r.results[key] = res
}

// Get returns a recorded key.
func (r *Report) Get(key string) (Result, bool) {
	res, ok := r.results[key]
	return res, ok
}

// Fail records a measurement that could not be taken.
func (r *Report) Fail(what string, err error) {
	r.failures = append(r.failures, fmt.Sprintf("%s: %v", what, err))
}

// Failures returns the measurement failures, plus one for every key of
// Keys that was not measured.
func (r *Report) Failures() []string {
	out := append([]string(nil), r.failures...)
	for _, k := range Keys {
		_, measured := r.results[k.Name]
		_, skipped := r.skipped[k.Name]
		if !measured && !skipped {
			out = append(out, fmt.Sprintf("%s: not measured", k.Name))
		}
	}
	return out
}

// keyOrder is Keys first, then informational keys in the order set.
func (r *Report) keyOrder() []string {
	var out []string
	for _, k := range Keys {
		if _, ok := r.results[k.Name]; ok {
			out = append(out, k.Name)
		}
	}
	for _, k := range r.order {
		if _, ok := specOf(k); !ok {
			out = append(out, k)
		}
	}
	return out
}

// MarshalJSON writes every measured key at the top level as a number,
// next to "goals", "status", "details" (the samples behind each value),
// "params" (machine and run parameters) and "failures".
func (r *Report) MarshalJSON() ([]byte, error) {
	top := map[string]any{}
	goals, status, details := map[string]string{}, map[string]string{}, map[string]Result{}
	for _, k := range r.keyOrder() {
		res := r.results[k]
		top[k] = round(res.Value, 4)
		goals[k], status[k], details[k] = res.Goal, res.Status, res
	}
	top["goals"], top["status"], top["details"] = goals, status, details
	top["params"] = r.Params
	failures := r.Failures()
	if failures == nil {
		failures = []string{}
	}
	top["failures"] = failures
	top["skipped"] = r.skipped
	return json.Marshal(top)
}

// WriteTable prints one line per key: value, median and p99 of its
// sample, goal and PASS/MISS.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVALUE\tUNIT\tSTAT\tMEDIAN\tP99\tN\tCI95\tGOAL\tRESULT")
	for _, k := range r.keyOrder() {
		res := r.results[k]
		med, p99, n, ci := "-", "-", "-", "-"
		if res.CI95 != nil {
			ci = fmt.Sprintf("%.3f-%.3f", res.CI95[0], res.CI95[1])
		}
		if res.Sample != nil {
			med, p99, n = num(res.Sample.Median), num(res.Sample.P99), fmt.Sprint(res.Sample.N)
		} else if len(res.Parts) > 0 {
			n = partsN(res.Parts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k, num(res.Value), res.Unit, res.Stat, med, p99, n, ci, res.Goal, res.Status)
	}
	for _, k := range Keys {
		if _, ok := r.results[k.Name]; !ok {
			status := "FAIL (not measured)"
			if why, skipped := r.skipped[k.Name]; skipped {
				status = "SKIP (" + why + ")"
			}
			fmt.Fprintf(tw, "%s\t-\t%s\t%s\t-\t-\t-\t-\t%s\t%s\n", k.Name, k.Unit, k.Stat, k.Goal, status)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeParts(w)
}

// writeParts prints the samples the ratios compare, each once.
func (r *Report) writeParts(w io.Writer) error {
	seen := map[string]bool{}
	var names []string
	parts := map[string]Summary{}
	for _, k := range r.keyOrder() {
		res := r.results[k]
		keys := make([]string, 0, len(res.Parts))
		for name := range res.Parts {
			keys = append(keys, name)
		}
		sort.Strings(keys)
		for _, name := range keys {
			if !seen[name] {
				seen[name] = true
				names = append(names, name)
				parts[name] = res.Parts[name]
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SAMPLE COMPARED\tMEDIAN\tP99\tMIN\tMAX\tN")
	for _, name := range names {
		s := parts[name]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", name, num(s.Median), num(s.P99), num(s.Min), num(s.Max), s.N)
	}
	return tw.Flush()
}

// partsN is "a+b" sample sizes of a ratio's parts, in name order.
func partsN(parts map[string]Summary) string {
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Strings(names)
	ns := make([]string, len(names))
	for i, n := range names {
		ns[i] = fmt.Sprint(parts[n].N)
	}
	return strings.Join(ns, "+")
}

// num prints a value with 4 significant digits.
func num(v float64) string { return fmt.Sprintf("%.4g", v) }

func round(v float64, digits int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	scale := math.Pow(10, float64(digits-1)-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}
