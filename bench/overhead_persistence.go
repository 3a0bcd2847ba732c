package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// persistenceOp is an operation's requests and its latency histogram's count and sum (s).
type persistenceOp [3]float64

// The counters of a persistenceOp.
const (
	opRequests = iota
	opLatencyCount
	opLatencySum
)

// persistenceCounters are the metrics scrapePersistence reads, by the counter each adds to.
var persistenceCounters = map[string]int{"persistence_requests": opRequests, "persistence_requests_total": opRequests,
	"persistence_latency_count": opLatencyCount, "persistence_latency_sum": opLatencySum}

// persistenceOps is a server's persistence counters by operation.
type persistenceOps map[string]persistenceOp

// scrapePersistence reads a server's persistence counters from its metrics port, by operation.
func scrapePersistence(ctx context.Context, port int) (persistenceOps, error) {
	if port == 0 {
		return nil, fmt.Errorf("no metrics port")
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ops := persistenceOps{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		field, ok := persistenceCounters[name]
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if !ok || err != nil {
			continue
		}
		op := "?"
		if _, after, ok := strings.Cut(rest, `operation="`); ok {
			op, _, _ = strings.Cut(after, `"`)
		}
		o := ops[op]
		o[field] += v
		ops[op] = o
	}
	return ops, sc.Err()
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
