package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGoal(t *testing.T) {
	tests := map[string]struct {
		goal Goal
		v    float64
		met  bool
		text string
	}{
		"less, met":            {goal: Goal{Op: "<", Value: 50}, v: 49.9, met: true, text: "< 50"},
		"less, equal misses":   {goal: Goal{Op: "<", Value: 50}, v: 50, met: false, text: "< 50"},
		"at most, equal meets": {goal: Goal{Op: "<=", Value: 1.03}, v: 1.03, met: true, text: "<= 1.03"},
		"at most, missed":      {goal: Goal{Op: "<=", Value: 1.03}, v: 1.031, met: false, text: "<= 1.03"},
		"about, inside":        {goal: Goal{Op: "~", Value: 1, Tolerance: 0.05}, v: 0.96, met: true, text: "1 ± 0.05"},
		"about, above":         {goal: Goal{Op: "~", Value: 1, Tolerance: 0.05}, v: 1.06, met: false, text: "1 ± 0.05"},
		"about, below":         {goal: Goal{Op: "~", Value: 1, Tolerance: 0.05}, v: 0.94, met: false, text: "1 ± 0.05"},
		"none":                 {goal: Goal{}, v: 1e9, met: true, text: "-"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.met, tc.goal.Met(tc.v))
			require.Equal(t, tc.text, tc.goal.String())
		})
	}
}

// fullReport has every key of Keys set, two of them missing their goal,
// plus one informational key.
func fullReport() *Report {
	r := NewReport()
	r.Params = Params{Machine: Machine{NProc: 2, Kernel: "6.1"}, Repetitions: map[string]int{"nri_create_ratio": 200}}
	for _, k := range Keys {
		v := 1.0
		switch k.Name {
		case "nri_handler_p99_us_plain":
			v = 80 // misses < 50
		case "nri_create_ratio":
			v = 1.2 // misses <= 1.03
		}
		res := Result{Value: v, Sample: &Summary{N: 300, Median: v / 2, P99: v, Min: 0.1, Max: v * 2}}
		if k.Unit == "ratio" {
			res = Result{Value: v, Parts: map[string]Summary{"with": {N: 200, Median: v}, "without": {N: 201, Median: 1}},
				CI95: &[2]float64{v - 0.05, v + 0.0512}, Samples: map[string][]float64{"with": {v, v}, "without": {1, 1}}}
		}
		r.Set(k.Name, res)
	}
	r.Set("hotunplug_ms", Result{Value: 12.5, Unit: "ms", Stat: "median", Sample: &Summary{N: 30, Median: 12.5, P99: 20}})
	return r
}

func TestReportJSONShape(t *testing.T) {
	data, err := json.Marshal(fullReport())
	require.NoError(t, err)
	var top map[string]any
	require.NoError(t, json.Unmarshal(data, &top))

	for _, k := range Keys {
		v, ok := top[k.Name]
		require.True(t, ok, "key %s missing", k.Name)
		_, isNumber := v.(float64)
		require.True(t, isNumber, "key %s is %T, want a number", k.Name, v)
	}
	require.Equal(t, 12.5, top["hotunplug_ms"])
	for _, k := range []string{"goals", "status", "details", "params"} {
		require.IsType(t, map[string]any{}, top[k], k)
	}
	require.Equal(t, []any{}, top["failures"])

	status := top["status"].(map[string]any)
	require.Equal(t, "MISS", status["nri_handler_p99_us_plain"])
	require.Equal(t, "MISS", status["nri_create_ratio"])
	require.Equal(t, "PASS", status["allocate_p99_us"])
	require.Equal(t, "INFO", status["podresources_p99_us"], "no goal: informational")
	require.Equal(t, "INFO", status["hotunplug_ms"])
	require.Equal(t, "<= 1.03", top["goals"].(map[string]any)["nri_create_ratio"])

	ratio := top["details"].(map[string]any)["nri_create_ratio"].(map[string]any)
	ci := ratio["ci95"].([]any)
	require.Len(t, ci, 2)
	require.InDelta(t, 1.15, ci[0], 1e-9)
	require.InDelta(t, 1.2512, ci[1], 1e-9)
	require.Equal(t, []any{1.2, 1.2}, ratio["samples"].(map[string]any)["with"])
	detail := top["details"].(map[string]any)["allocate_p99_us"].(map[string]any)
	require.Equal(t, "us", detail["unit"])
	require.Equal(t, "p99", detail["stat"])
	require.Equal(t, float64(300), detail["sample"].(map[string]any)["n"])
	params := top["params"].(map[string]any)
	require.Equal(t, float64(2), params["machine"].(map[string]any)["nproc"])
	require.Equal(t, float64(200), params["repetitions"].(map[string]any)["nri_create_ratio"])
}

func TestReportMissingKeysAreFailures(t *testing.T) {
	r := NewReport()
	r.Set("scan_write_ms_16", Result{Value: 3})
	r.Fail("hotplug", errNoSamples)

	failures := r.Failures()
	require.Contains(t, failures, "hotplug: no samples")
	require.Contains(t, failures, "nri_create_ratio: not measured")
	require.NotContains(t, strings.Join(failures, "\n"), "scan_write_ms_16")
	require.Len(t, failures, 1+len(Keys)-1)

	data, err := json.Marshal(r)
	require.NoError(t, err)
	var top map[string]any
	require.NoError(t, json.Unmarshal(data, &top))
	require.NotContains(t, top, "nri_create_ratio", "an unmeasured key must not appear as a number")
	require.Len(t, top["failures"], len(failures))

	var buf bytes.Buffer
	require.NoError(t, r.WriteTable(&buf))
	require.Regexp(t, `(?m)^nri_create_ratio\s+-.*FAIL \(not measured\)$`, buf.String())
	require.Regexp(t, `(?m)^scan_write_ms_16\s+3\s+ms\s+median.*PASS$`, buf.String())
}

func TestReportSkippedKeysAreNotFailures(t *testing.T) {
	r := fullReport()
	delete(r.results, "nri_rss_mb")
	delete(r.results, "nri_create_ratio")
	r.Skip("-skip-containerd", "nri_rss_mb")
	require.Equal(t, []string{"nri_create_ratio: not measured"}, r.Failures())

	var buf bytes.Buffer
	require.NoError(t, r.WriteTable(&buf))
	require.Regexp(t, `(?m)^nri_rss_mb\s+-.*SKIP \(-skip-containerd\)$`, buf.String())
	require.Regexp(t, `(?m)^nri_create_ratio\s+-.*FAIL \(not measured\)$`, buf.String())

	data, err := json.Marshal(r)
	require.NoError(t, err)
	var top map[string]any
	require.NoError(t, json.Unmarshal(data, &top))
	require.Equal(t, map[string]any{"nri_rss_mb": "-skip-containerd"}, top["skipped"])
	require.NotContains(t, top, "nri_rss_mb")
}

func TestReportTable(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, fullReport().WriteTable(&buf))
	main, parts, ok := strings.Cut(buf.String(), "\n\n")
	require.True(t, ok, "a blank line before the compared samples:\n%s", buf.String())
	lines := strings.Split(strings.TrimSpace(main), "\n")
	require.Len(t, lines, 1+len(Keys)+1)
	require.Regexp(t, `^KEY\s+VALUE\s+UNIT`, lines[0])
	for i, k := range Keys {
		require.True(t, strings.HasPrefix(lines[1+i], k.Name+" "), "line %d is %q, want key %s", 1+i, lines[1+i], k.Name)
	}
	line := func(key string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, key+" ") {
				return l
			}
		}
		t.Fatalf("no line for %s", key)
		return ""
	}
	require.Regexp(t, `^nri_create_ratio\s+1\.2\s+ratio\s.*\s200\+201\s+1\.150-1\.251\s+<= 1\.03\s+MISS$`, line("nri_create_ratio"))
	require.Regexp(t, `^nri_handler_p99_us_plain\s+80\s+us\s+p99\s+40\s+80\s+300\s+-\s+< 50\s+MISS$`, line("nri_handler_p99_us_plain"))
	require.Regexp(t, `^hotunplug_ms\s+12\.5\s+ms\s+median\s+12\.5\s+20\s+30\s+-\s+-\s+INFO$`, lines[len(lines)-1])

	// Both ratios share their part names: each sample is listed once.
	partLines := strings.Split(strings.TrimSpace(parts), "\n")
	require.Len(t, partLines, 3)
	require.Regexp(t, `^SAMPLE COMPARED\s+MEDIAN\s+P99\s+MIN\s+MAX\s+N$`, partLines[0])
	require.Regexp(t, `^without\s`, partLines[2])
	require.Regexp(t, `^with\s+1\.2\s+0\s+0\s+0\s+200$`, partLines[1])
}

// A ratio meets its goal only when its whole 95 % interval does.
func TestRatioGoalNeedsInterval(t *testing.T) {
	r := NewReport()
	r.Set("nri_verify_cdi_ratio", Result{Value: 1.01, CI95: &[2]float64{0.99, 1.03}})
	r.Set("nri_inject_ratio", Result{Value: 1.01, CI95: &[2]float64{0.99, 1.019}})
	r.Set("nri_cdi_vs_nri_ratio", Result{Value: 1.0, CI95: &[2]float64{0.94, 1.02}})
	r.Set("allocate_p99_us", Result{Value: 150})
	for key, want := range map[string]string{
		"nri_verify_cdi_ratio": "MISS", "nri_inject_ratio": "PASS", "nri_cdi_vs_nri_ratio": "MISS", "allocate_p99_us": "PASS",
	} {
		got, ok := r.Get(key)
		require.True(t, ok, key)
		require.Equal(t, want, got.Status, key)
	}
}

func TestRound(t *testing.T) {
	tests := map[string]struct{ in, want float64 }{
		"ratio":  {1.0123456, 1.012},
		"large":  {123456, 123500},
		"small":  {0.00123456, 0.001235},
		"zero":   {0, 0},
		"negate": {-2.34567, -2.346},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.InDelta(t, tc.want, round(tc.in, 4), 1e-12)
		})
	}
}

func TestParseProcField(t *testing.T) {
	status := "Name:\tdri-cdi-agent\nVmPeak:\t  900000 kB\nVmRSS:\t   14336 kB\nThreads:\t8\n"
	kb, err := parseProcField(status, "VmRSS")
	require.NoError(t, err)
	require.Equal(t, int64(14336), kb)

	_, err = parseProcField(status, "VmSwap")
	require.ErrorContains(t, err, "no VmSwap line")
	_, err = parseProcField("VmRSS:\tlots kB\n", "VmRSS")
	require.ErrorContains(t, err, "VmRSS")
	_, err = parseProcField("VmRSS:\t12 MB\n", "VmRSS")
	require.ErrorContains(t, err, "unit")
}

func TestParseLoadAvg(t *testing.T) {
	la, err := parseLoadAvg("0.52 1.03 2.50 3/421 12345\n")
	require.NoError(t, err)
	require.Equal(t, [3]float64{0.52, 1.03, 2.5}, la)
	_, err = parseLoadAvg("0.5 1.0")
	require.Error(t, err)
	_, err = parseLoadAvg("a b c")
	require.Error(t, err)
}

func TestOSName(t *testing.T) {
	require.Equal(t, "Debian GNU/Linux 12 (bookworm)", osName("NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n"))
	require.Equal(t, "", osName("ID=debian\n"))
}

func TestParseCPUTime(t *testing.T) {
	// utime 250 and stime 31 ticks, after a command name with a space
	// and a parenthesis.
	stat := "4242 (dri-cdi (x) a) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 31 0 0 20 0 9 0 123 0 0\n"
	d, err := parseCPUTime(stat)
	require.NoError(t, err)
	require.Equal(t, 2810*time.Millisecond, d)
	_, err = parseCPUTime("4242 dri-cdi S 1")
	require.ErrorContains(t, err, "no command name")
	_, err = parseCPUTime("4242 (a) S 1 2 3")
	require.ErrorContains(t, err, "too few fields")
	_, err = parseCPUTime("4242 (a) S 1 4242 4242 0 -1 4194560 1200 0 0 0 x 31 0")
	require.Error(t, err)
}

func TestEveryKeyHasOneStep(t *testing.T) {
	steps := map[string]string{}
	for step, keys := range stepKeys {
		for _, k := range keys {
			require.NotContains(t, steps, k, "%s is in steps %s and %s", k, steps[k], step)
			steps[k] = step
		}
	}
	for _, k := range Keys {
		require.Contains(t, steps, k.Name, "-only must know the step of %s", k.Name)
	}
	ids := map[string]bool{}
	for name, id := range stepNames {
		require.Contains(t, stepKeys, id, "step %q", name)
		ids[id] = true
	}
	require.Len(t, ids, len(stepKeys), "every step has a logged name")
	cfg := Config{Only: []string{stepUsage}}
	require.True(t, cfg.runs(usageStep))
	require.False(t, cfg.runs("in-process measurements"))
	require.True(t, (&Config{}).runs("in-process measurements"))
	require.NoError(t, (&Config{Only: []string{"usage", "inproc"}}).checkOnly())
	require.ErrorContains(t, (&Config{Only: []string{"usage", "gpu"}}).checkOnly(), `unknown step "gpu"`)
	// The cluster step runs on the suite's node without the container
	// path's measurements (-cluster-only).
	require.NoError(t, (&Config{Only: []string{"cluster"}}).checkOnly())
	require.True(t, (&Config{Only: []string{"cluster"}}).needsSuite())
	require.False(t, (&Config{Only: []string{"cluster"}}).runs("container path through containerd"))
	require.False(t, (&Config{Only: []string{"usage"}}).needsSuite())
	require.False(t, (&Config{Only: []string{"cluster"}, SkipCluster: true}).needsSuite())
}
