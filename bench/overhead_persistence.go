package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// persistenceOp is one persistence operation's counters as a Temporal server exports them:
// requests, and the count and sum (seconds) of its latency histogram.
type persistenceOp struct {
	requests, latencyCount, latencySum float64
}

// persistenceOps is a server's persistence counters by operation.
type persistenceOps map[string]persistenceOp

// scrapePersistence reads the persistence_requests and persistence_latency counters a
// Temporal server exports on its metrics port, summed by operation over every other label.
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
		var field func(*persistenceOp) *float64
		switch name {
		case "persistence_requests", "persistence_requests_total":
			field = func(o *persistenceOp) *float64 { return &o.requests }
		case "persistence_latency_count":
			field = func(o *persistenceOp) *float64 { return &o.latencyCount }
		case "persistence_latency_sum":
			field = func(o *persistenceOp) *float64 { return &o.latencySum }
		default:
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		op := "?"
		if _, after, ok := strings.Cut(rest, `operation="`); ok {
			op, _, _ = strings.Cut(after, `"`)
		}
		o := ops[op]
		*field(&o) += v
		ops[op] = o
	}
	return ops, sc.Err()
}

// total is the requests over every operation.
func (p persistenceOps) total() float64 {
	n := 0.0
	for _, o := range p {
		n += o.requests
	}
	return n
}

// since is p minus an earlier scrape of the same server.
func (p persistenceOps) since(before persistenceOps) persistenceOps {
	out := persistenceOps{}
	for op, o := range p {
		b := before[op]
		d := persistenceOp{o.requests - b.requests, o.latencyCount - b.latencyCount, o.latencySum - b.latencySum}
		if d.requests > 0 || d.latencyCount > 0 {
			out[op] = d
		}
	}
	return out
}

// scaled is p with every counter times f.
func (p persistenceOps) scaled(f float64) persistenceOps {
	out := persistenceOps{}
	for op, o := range p {
		out[op] = persistenceOp{o.requests * f, o.latencyCount * f, o.latencySum * f}
	}
	return out
}

// less is p minus an expected background, never below zero.
func (p persistenceOps) less(background persistenceOps) persistenceOps {
	out := persistenceOps{}
	for op, o := range p {
		b := background[op]
		out[op] = persistenceOp{max(0, o.requests-b.requests), max(0, o.latencyCount-b.latencyCount), max(0, o.latencySum-b.latencySum)}
	}
	return out
}

// add sums d into p.
func (p persistenceOps) add(d persistenceOps) {
	for op, o := range d {
		s := p[op]
		s.requests += o.requests
		s.latencyCount += o.latencyCount
		s.latencySum += o.latencySum
		p[op] = s
	}
}

// persistenceRequests sums the persistence_requests counters of a server (every operation).
func persistenceRequests(ctx context.Context, port int) (float64, error) {
	ops, err := scrapePersistence(ctx, port)
	return ops.total(), err
}

// persistenceBreakdown is the table of where one MergeWal's persistence time goes on each
// server: per operation, requests per merge, mean latency, and their product (time spent in
// that operation per merge, summed over requests that may overlap), the heaviest first.
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
			perRun := o.requests / float64(merges)
			mean := 0.0
			if o.latencyCount > 0 {
				mean = 1000 * o.latencySum / o.latencyCount
			}
			rows = append(rows, row{op, perRun, mean, perRun * mean})
			reqs += perRun
			total += perRun * mean
		}
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].time != rows[j].time {
				return rows[i].time > rows[j].time
			}
			return rows[i].op < rows[j].op
		})
		for i, r := range rows {
			if i == 8 {
				break
			}
			t.Rows = append(t.Rows, []string{sv.name, r.op, fmt.Sprintf("%.1f", r.perRun), fmt.Sprintf("%.2f", r.mean), fmt.Sprintf("%.1f", r.time)})
		}
		t.Rows = append(t.Rows, []string{sv.name, "**all operations**", fmt.Sprintf("%.1f", reqs), "", fmt.Sprintf("%.1f", total)})
	}
	return t
}
