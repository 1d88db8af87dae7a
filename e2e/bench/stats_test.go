package main

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100..1, unsorted on purpose
	}
	thousand := make([]float64, 1000)
	for i := range thousand {
		thousand[i] = float64(i + 1)
	}
	tests := map[string]struct {
		in   []float64
		want Summary
	}{
		"one value":          {in: []float64{7}, want: Summary{N: 1, Median: 7, P99: 7, Min: 7, Max: 7}},
		"odd count":          {in: []float64{3, 1, 2}, want: Summary{N: 3, Median: 2, P99: 3, Min: 1, Max: 3}},
		"even count":         {in: []float64{4, 1, 3, 2}, want: Summary{N: 4, Median: 2.5, P99: 4, Min: 1, Max: 4}},
		"hundred: p99 is 99": {in: hundred, want: Summary{N: 100, Median: 50.5, P99: 99, Min: 1, Max: 100}},
		"thousand":           {in: thousand, want: Summary{N: 1000, Median: 500.5, P99: 990, Min: 1, Max: 1000}},
		"one outlier in 200 does not move p99": {
			in:   append(repeat(1, 199), 1000),
			want: Summary{N: 200, Median: 1, P99: 1, Min: 1, Max: 1000},
		},
		"three outliers in 200 do": {
			in:   append(repeat(1, 197), 1000, 1000, 1000),
			want: Summary{N: 200, Median: 1, P99: 1000, Min: 1, Max: 1000},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := append([]float64(nil), tc.in...)
			got, err := Summarize(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, in, tc.in, "Summarize must not reorder its input")
		})
	}
}

func TestSummarizeRejects(t *testing.T) {
	tests := map[string][]float64{
		"empty": nil,
		"NaN":   {1, math.NaN()},
		"Inf":   {math.Inf(1)},
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Summarize(in)
			require.Error(t, err)
		})
	}
}

func TestPercentile(t *testing.T) {
	s := []float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	tests := map[string]struct {
		p    float64
		want float64
	}{
		"p0 is the minimum":   {p: 0, want: 10},
		"p10":                 {p: 10, want: 10},
		"p11 rounds up":       {p: 11, want: 20},
		"p50":                 {p: 50, want: 50},
		"p99":                 {p: 99, want: 100},
		"p100 is the maximum": {p: 100, want: 100},
		"below 0 clamps":      {p: -5, want: 10},
		"above 100 clamps":    {p: 150, want: 100},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, Percentile(s, tc.p))
		})
	}
	require.True(t, math.IsNaN(Percentile(nil, 50)))
}

func TestRatio(t *testing.T) {
	tests := map[string]struct {
		a, b    Summary
		want    float64
		wantErr bool
	}{
		"medians":          {a: Summary{N: 3, Median: 103}, b: Summary{N: 5, Median: 100}, want: 1.03},
		"empty numerator":  {a: Summary{}, b: Summary{N: 1, Median: 1}, wantErr: true},
		"empty reference":  {a: Summary{N: 1, Median: 1}, b: Summary{}, wantErr: true},
		"zero reference":   {a: Summary{N: 1, Median: 1}, b: Summary{N: 1, Median: 0}, wantErr: true},
		"faster than base": {a: Summary{N: 1, Median: 90}, b: Summary{N: 1, Median: 100}, want: 0.9},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Ratio(tc.a, tc.b)
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.InDelta(t, tc.want, got, 1e-12)
		})
	}
}

func TestIn(t *testing.T) {
	got := In(time.Microsecond, []time.Duration{1500 * time.Nanosecond, 2 * time.Millisecond})
	require.Equal(t, []float64{1.5, 2000}, got)
	require.Equal(t, []float64{0.25}, In(time.Millisecond, []time.Duration{250 * time.Microsecond}))
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestRatioCI(t *testing.T) {
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }
	noisy := func(seed uint64, n int, scale float64) []float64 {
		r := rand.New(rand.NewPCG(seed, 7))
		out := make([]float64, n)
		for i := range out {
			out[i] = scale * (100 + 30*r.NormFloat64())
		}
		return out
	}
	base := noisy(3, 200, 1)
	scaled := make([]float64, len(base))
	for i, v := range base {
		scaled[i] = 1.1 * v
	}

	t.Run("a sample against itself scaled by 1.1 gives a wide interval around 1.1", func(t *testing.T) {
		lo, hi, err := RatioCI(scaled, base, 0.95, 2000, rng())
		require.NoError(t, err)
		require.Less(t, lo, 1.1)
		require.Greater(t, hi, 1.1)
		require.Less(t, hi-lo, 0.2, "n=200 with 30%% noise: the interval is a few percent wide, not unbounded")
	})
	t.Run("two samples of one distribution contain 1", func(t *testing.T) {
		lo, hi, err := RatioCI(noisy(4, 200, 1), noisy(5, 200, 1), 0.95, 2000, rng())
		require.NoError(t, err)
		require.LessOrEqual(t, lo, 1.0)
		require.GreaterOrEqual(t, hi, 1.0)
	})
	t.Run("a 30%% difference is outside the interval of 1", func(t *testing.T) {
		lo, hi, err := RatioCI(noisy(6, 200, 1.3), noisy(7, 200, 1), 0.95, 2000, rng())
		require.NoError(t, err)
		require.Greater(t, lo, 1.15)
		require.Less(t, hi, 1.45)
	})
	t.Run("constant samples give a point", func(t *testing.T) {
		lo, hi, err := RatioCI(repeat(3, 50), repeat(2, 50), 0.95, 100, rng())
		require.NoError(t, err)
		require.Equal(t, 1.5, lo)
		require.Equal(t, 1.5, hi)
	})
	t.Run("reproducible with the same seed", func(t *testing.T) {
		lo1, hi1, err := RatioCI(noisy(8, 100, 1), base, 0.95, 500, rng())
		require.NoError(t, err)
		lo2, hi2, err := RatioCI(noisy(8, 100, 1), base, 0.95, 500, rng())
		require.NoError(t, err)
		require.Equal(t, [2]float64{lo1, hi1}, [2]float64{lo2, hi2})
	})
	for name, tc := range map[string]struct {
		a, b      []float64
		level     float64
		resamples int
	}{
		"empty a":        {a: nil, b: base, level: 0.95, resamples: 10},
		"empty b":        {a: base, b: nil, level: 0.95, resamples: 10},
		"level 1":        {a: base, b: base, level: 1, resamples: 10},
		"no resamples":   {a: base, b: base, level: 0.95, resamples: 0},
		"zero reference": {a: base, b: repeat(0, 10), level: 0.95, resamples: 10},
	} {
		t.Run("rejects "+name, func(t *testing.T) {
			_, _, err := RatioCI(tc.a, tc.b, tc.level, tc.resamples, rng())
			require.Error(t, err)
		})
	}
}

func TestCompare(t *testing.T) {
	num, den := []float64{2, 4, 6, 8, 10}, []float64{1, 2, 3, 4, 5}
	c, err := Compare(num, den)
	require.NoError(t, err)
	a, err := Summarize(num)
	require.NoError(t, err)
	d, err := Summarize(den)
	require.NoError(t, err)
	lo, hi, err := RatioCI(num, den, 0.95, 2000, rand.New(rand.NewPCG(1, 2)))
	require.NoError(t, err)
	require.Equal(t, Comparison{Num: a, Den: d, Ratio: 2, CI95: [2]float64{lo, hi}}, c)
	again, err := Compare(num, den)
	require.NoError(t, err)
	require.Equal(t, c, again, "the same samples give the same interval")

	for name, tc := range map[string]struct {
		num, den []float64
		err      string
	}{
		"no sample":       {nil, den, "sample: no samples"},
		"no reference":    {num, nil, "reference: no samples"},
		"zero reference":  {num, []float64{0, 0}, "median of the reference sample is 0"},
		"bootstrap fails": {num, []float64{-1, 1, 2}, "bootstrap: a resampled reference median"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Compare(tc.num, tc.den)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
