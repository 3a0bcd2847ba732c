package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/walkeeper/walkeeper/internal/testkit/promtext"
)

// persistenceOp is an operation's requests and its latency histogram's count and sum (s).
type persistenceOp [3]float64

// The counters of a persistenceOp.
const (
	opRequests = iota
	opLatencyCount
	opLatencySum
)

// persistenceOps is a server's persistence counters by operation.
type persistenceOps map[string]persistenceOp

// scrapePersistence reads a server's persistence counters from its metrics port, by
// operation: the requests counter (persistence_requests, or persistence_requests_total from an
// OpenTelemetry exporter) and the latency histogram's count and sum.
func scrapePersistence(ctx context.Context, port int) (persistenceOps, error) {
	if port == 0 {
		return nil, fmt.Errorf("no metrics port")
	}
	families, err := promtext.Scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return nil, err
	}
	ops := persistenceOps{}
	add := func(m *dto.Metric, counter int, v float64) {
		op := "?"
		for _, l := range m.GetLabel() {
			if l.GetName() == "operation" {
				op = l.GetValue()
			}
		}
		o := ops[op]
		o[counter] += v
		ops[op] = o
	}
	for _, name := range []string{"persistence_requests", "persistence_requests_total"} {
		for _, m := range families[name].GetMetric() {
			add(m, opRequests, m.GetCounter().GetValue())
		}
	}
	for _, m := range families["persistence_latency"].GetMetric() {
		add(m, opLatencyCount, float64(m.GetHistogram().GetSampleCount()))
		add(m, opLatencySum, m.GetHistogram().GetSampleSum())
	}
	return ops, nil
}

// total is the requests over every operation.
func (p persistenceOps) total() float64 {
	n := 0.0
	for _, o := range p {
		n += o[opRequests]
	}
	return n
}

// zip is f over each counter of p and of q's same operation, for p's operations.
func (p persistenceOps) zip(q persistenceOps, f func(a, b float64) float64) persistenceOps {
	out := persistenceOps{}
	for op, o := range p {
		for i := range o {
			o[i] = f(o[i], q[op][i])
		}
		out[op] = o
	}
	return out
}

// since is p minus an earlier scrape of the same server.
func (p persistenceOps) since(before persistenceOps) persistenceOps {
	out := p.zip(before, func(a, b float64) float64 { return a - b })
	maps.DeleteFunc(out, func(_ string, o persistenceOp) bool { return o[opRequests] <= 0 && o[opLatencyCount] <= 0 })
	return out
}

// scaled is p with every counter times f.
func (p persistenceOps) scaled(f float64) persistenceOps {
	return p.zip(nil, func(a, _ float64) float64 { return a * f })
}

// less is p minus an expected background, never below zero.
func (p persistenceOps) less(background persistenceOps) persistenceOps {
	return p.zip(background, func(a, b float64) float64 { return max(0, a-b) })
}

func (p persistenceOps) add(d persistenceOps) {
	for op, o := range d {
		s := p[op]
		for i := range s {
			s[i] += o[i]
		}
		p[op] = s
	}
}

// persistenceBreakdown is where one MergeWal's persistence time goes on each server, by operation,
// the heaviest first.
func persistenceBreakdown(servers []*overheadServer, merges int) Table {
	t := Table{
		Title:  "Persistence per MergeWal run (each repetition's merges, less the server's idle rate), by operation: requests per run, mean latency (ms), time per run (ms), heaviest first",
		Header: []string{"server", "operation", "requests per run", "mean latency (ms)", "time per run (ms)"},
	}
	for _, sv := range servers {
		if len(sv.mergeOps) == 0 || merges == 0 {
			continue
		}
		type row struct {
			op                 string
			perRun, mean, time float64
		}
		var rows []row
		var reqs, total float64
		for op, o := range sv.mergeOps {
			perRun := o[opRequests] / float64(merges)
			mean := 0.0
			if o[opLatencyCount] > 0 {
				mean = 1000 * o[opLatencySum] / o[opLatencyCount]
			}
			rows = append(rows, row{op, perRun, mean, perRun * mean})
			reqs += perRun
			total += perRun * mean
		}
		slices.SortFunc(rows, func(a, b row) int {
			return cmp.Or(cmp.Compare(b.time, a.time), strings.Compare(a.op, b.op))
		})
		for _, r := range rows[:min(8, len(rows))] {
			t.Rows = append(t.Rows, []string{sv.name, r.op, fmt.Sprintf("%.1f", r.perRun), fmt.Sprintf("%.2f", r.mean), fmt.Sprintf("%.1f", r.time)})
		}
		t.Rows = append(t.Rows, []string{sv.name, "**all operations**", fmt.Sprintf("%.1f", reqs), "", fmt.Sprintf("%.1f", total)})
	}
	return t
}
