// Package promtext reads a Prometheus /metrics answer for the tests and benchmarks through
// the Prometheus text parser, so that a series is picked by its labels' exact values, not by a
// substring of its line.
package promtext

import (
	"context"
	"fmt"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape gets url, a text exposition, and returns its metric families by name.
func Scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(res.Body)
}

// Value is the value of f's first series that has every label of labels, given as name,
// value pairs; ok is false when none has (or f is nil).
func Value(f *dto.MetricFamily, labels ...string) (v float64, ok bool) {
	for _, m := range f.GetMetric() {
		if hasLabels(m, labels) {
			return value(m), true
		}
	}
	return 0, false
}

// Sum is the sum of every series of f (0 when f is nil).
func Sum(f *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		sum += value(m)
	}
	return sum
}

// hasLabels reports whether m carries every name, value pair of labels.
func hasLabels(m *dto.Metric, labels []string) bool {
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("promtext: labels come in name, value pairs: %q", labels))
	}
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value is a counter's, gauge's or untyped series' value.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}
