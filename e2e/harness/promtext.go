package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a /metrics answer in the Prometheus text format, parsed by
// the Prometheus client libraries' own parser: the one reader of metrics
// in the e2e (the kubelet's, and every dri-cdi daemon's).
type Metrics map[string]*dto.MetricFamily

// ScrapeMetrics GETs a /metrics url within timeout and parses it.
func ScrapeMetrics(ctx context.Context, url string, timeout time.Duration) (Metrics, error) {
	body, err := httpGet(ctx, url, timeout)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(body))
}

// ParseMetrics parses a /metrics answer.
func ParseMetrics(body string) (Metrics, error) {
	// A zero-value TextParser panics in prometheus/common v0.72: it must
	// be given its name validation scheme.
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Metrics(fams), nil
}

// Families returns the names of the metric families that start with
// prefix.
func (m Metrics) Families(prefix string) map[string]bool {
	names := map[string]bool{}
	for name := range m {
		if strings.HasPrefix(name, prefix) {
			names[name] = true
		}
	}
	return names
}

// Sum adds up the samples of name whose labels include every pair of
// labels (name, value, name, value, ...), and says whether there was
// one. name is a family, or a histogram's or summary's "<family>_count"
// or "<family>_sum".
func (m Metrics) Sum(name string, labels ...string) (float64, bool) {
	fam, part := m[name], ""
	if fam == nil {
		for _, suffix := range []string{"_count", "_sum"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && m[base] != nil {
				fam, part = m[base], suffix
			}
		}
	}
	if fam == nil {
		return 0, false
	}
	var sum float64
	found := false
	for _, s := range fam.GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		v, ok := sampleValue(s, part)
		if ok {
			sum += v
			found = true
		}
	}
	return sum, found
}

// Histogram is the sum and the count of the samples of the histogram
// (or summary) family whose labels include every pair of labels, from
// one scrape; 0 and 0 when there is none.
func (m Metrics) Histogram(family string, labels ...string) (sum, count float64) {
	sum, _ = m.Sum(family+"_sum", labels...)
	count, _ = m.Sum(family+"_count", labels...)
	return sum, count
}

// Sample is one series of a family: its labels and its value.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples returns every series of the counter, gauge or untyped family
// name (none when there is no such family).
func (m Metrics) Samples(name string) []Sample {
	var out []Sample
	for _, s := range m[name].GetMetric() {
		v, ok := sampleValue(s, "")
		if !ok {
			continue
		}
		l := make(map[string]string, len(s.GetLabel()))
		for _, p := range s.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		out = append(out, Sample{Labels: l, Value: v})
	}
	return out
}

func hasLabels(s *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		match := false
		for _, l := range s.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				match = true
			}
		}
		if !match {
			return false
		}
	}
	return true
}

func sampleValue(s *dto.Metric, part string) (float64, bool) {
	switch {
	case s.Counter != nil && part == "":
		return s.Counter.GetValue(), true
	case s.Gauge != nil && part == "":
		return s.Gauge.GetValue(), true
	case s.Untyped != nil && part == "":
		return s.Untyped.GetValue(), true
	case s.Histogram != nil && part == "_count":
		return float64(s.Histogram.GetSampleCount()), true
	case s.Histogram != nil && part == "_sum":
		return s.Histogram.GetSampleSum(), true
	case s.Summary != nil && part == "_count":
		return float64(s.Summary.GetSampleCount()), true
	case s.Summary != nil && part == "_sum":
		return s.Summary.GetSampleSum(), true
	}
	return 0, false
}
