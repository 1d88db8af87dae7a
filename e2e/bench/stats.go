package main

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// errNoSamples is returned when a statistic is asked of an empty sample.
var errNoSamples = errors.New("no samples")

// Summary describes one sample: its size, median, 99th percentile and
// extremes, in the unit the sample was recorded in.
type Summary struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize computes the Summary of values. The median of an even-sized
// sample is the mean of its two middle values; P99 is the nearest-rank
// 99th percentile (see Percentile).
func Summarize(values []float64) (Summary, error) {
	if len(values) == 0 {
		return Summary{}, errNoSamples
	}
	s := slices.Clone(values)
	slices.Sort(s)
	for _, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Summary{}, fmt.Errorf("sample holds %v", v)
		}
	}
	return Summary{
		N:      len(s),
		Median: median(s),
		P99:    Percentile(s, 99),
		Min:    s[0],
		Max:    s[len(s)-1],
	}, nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Percentile returns the nearest-rank p-th percentile of a sorted,
// non-empty sample: the smallest value such that at least p percent of
// the sample is at or below it. p is clamped to [0, 100]; p = 0 gives the
// minimum.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	p = min(max(p, 0), 100)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// Ratio is the ratio of the medians of two samples, a over b.
func Ratio(a, b Summary) (float64, error) {
	if a.N == 0 || b.N == 0 {
		return 0, errNoSamples
	}
	if b.Median <= 0 {
		return 0, fmt.Errorf("median of the reference sample is %v", b.Median)
	}
	return a.Median / b.Median, nil
}

// In converts durations to float64 counts of unit (time.Microsecond gives
// microseconds).
func In(unit time.Duration, ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(unit)
	}
	return out
}

// RatioCI is the bootstrap percentile interval, at the given confidence
// level (0.95), of the ratio of the medians of a over b: both samples are
// resampled with replacement, independently, resamples times. rng makes
// the interval reproducible.
func RatioCI(a, b []float64, level float64, resamples int, rng *rand.Rand) (lo, hi float64, err error) {
	if len(a) == 0 || len(b) == 0 {
		return 0, 0, errNoSamples
	}
	if level <= 0 || level >= 1 || resamples < 1 {
		return 0, 0, fmt.Errorf("bootstrap: level %v, %d resamples", level, resamples)
	}
	ratios := make([]float64, 0, resamples)
	ra, rb := make([]float64, len(a)), make([]float64, len(b))
	for range resamples {
		for i := range ra {
			ra[i] = a[rng.IntN(len(a))]
		}
		for i := range rb {
			rb[i] = b[rng.IntN(len(b))]
		}
		slices.Sort(ra)
		slices.Sort(rb)
		mb := median(rb)
		if mb <= 0 {
			return 0, 0, fmt.Errorf("bootstrap: a resampled reference median is %v", mb)
		}
		ratios = append(ratios, median(ra)/mb)
	}
	slices.Sort(ratios)
	tail := (1 - level) / 2 * 100
	return Percentile(ratios, tail), Percentile(ratios, 100-tail), nil
}

// Comparison is how a sample compares with a reference sample: both
// summaries, the ratio of their medians and its 95% bootstrap interval.
type Comparison struct {
	Num, Den Summary
	Ratio    float64
	CI95     [2]float64
}

// Compare compares num with the reference den, as every ratio key of
// the report does: Ratio of the summaries and RatioCI at 0.95 over 2000
// resamples, with a fixed seed so that the same samples give the same
// interval.
func Compare(num, den []float64) (Comparison, error) {
	var c Comparison
	var err error
	if c.Num, err = Summarize(num); err != nil {
		return c, fmt.Errorf("sample: %w", err)
	}
	if c.Den, err = Summarize(den); err != nil {
		return c, fmt.Errorf("reference: %w", err)
	}
	if c.Ratio, err = Ratio(c.Num, c.Den); err != nil {
		return c, err
	}
	c.CI95[0], c.CI95[1], err = RatioCI(num, den, 0.95, 2000, rand.New(rand.NewPCG(1, 2)))
	return c, err
}

// abbaA reports whether block bi of a comparison in ABBA order (A B B A
// A B B A ...) is arm A's.
func abbaA(bi int) bool { return bi%4 == 0 || bi%4 == 3 }
