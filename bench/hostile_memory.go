package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/worker"
)

// runHostileMemory runs each case in a fresh worker; knobs are the first worker's.
func runHostileMemory(ctx context.Context, o Options, sz hostileSizes, dir string) (knobs hostileKnobs, all []hostileCase, err error) {
	for _, c := range []struct {
		key string
		run func(ctx context.Context, w *hostileWorker) ([]hostileCase, error)
	}{
		{"wide", hostileWideRows},
		{"big", hostileBigValues},
		{"conns", hostileConnections},
	} {
		w, err := startHostileWorker(ctx, o, sz, fileURL(filepath.Join(dir, c.key), true), "hostile-"+c.key, nil)
		if err != nil {
			return knobs, nil, err
		}
		if knobs == nil {
			knobs = w.child.ready.Knobs
		}
		cases, err := c.run(ctx, w)
		w.stop()
		if err != nil {
			return knobs, nil, fmt.Errorf("hostile %s: %w\n%s", c.key, err, lastLines(w.child.stderr.String(), 20))
		}
		all = append(all, cases...)
	}
	return knobs, all, nil
}

// knobAtMost is the worker's knob name (a size or a count), at most limit.
func (w *hostileWorker) knobAtMost(name string, limit int) int {
	if n, err := worker.ParseBytes(w.child.ready.Knobs[name]); err == nil && n > 0 && n < int64(limit) {
		return int(n)
	}
	return limit
}

// hostileWideRows appends bodies as large as accepted to a wide schema: a value per null column.
func hostileWideRows(ctx context.Context, w *hostileWorker) ([]hostileCase, error) {
	fields := []map[string]any{{"name": "id", "type": "string"}}
	for i := 1; i <= w.sz.wideColumns; i++ {
		fields = append(fields, map[string]any{"name": fmt.Sprintf("c%03d", i), "type": "string", "nullable": true})
	}
	if err := w.client.createStore(ctx, "wide", fields); err != nil {
		return nil, err
	}
	size := w.knobAtMost("max-body-bytes", w.sz.wideBody)
	var bodies [][]byte
	rows := 0
	for i := 0; i < w.sz.wideAppends; i++ {
		b, n := wideRowsBody(size, rows)
		bodies = append(bodies, b)
		rows += n
	}
	req := fmt.Sprintf("%d concurrent appends of %s (%d rows each) to id + %d nullable columns", len(bodies), fmtBytes(int64(size)), rows/len(bodies), w.sz.wideColumns)
	c := w.phase(ctx, "wide_rows", "wide rows", req, func(ctx context.Context) ([]answer, string, map[string]float64) {
		as := make([]answer, len(bodies))
		var wg sync.WaitGroup
		for i, b := range bodies {
			wg.Go(func() { as[i], _ = w.client.do(ctx, http.MethodPost, "/api/v1/stores/generic/wide/rows", b) })
		}
		wg.Wait()
		return as, "", map[string]float64{"rows": float64(rows)}
	})
	return []hostileCase{c}, nil
}

// wideRowsBody is a JSON array of id-only rows of at most size bytes, and its row count.
func wideRowsBody(size, first int) ([]byte, int) {
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('[')
	n := 0
	for {
		row := fmt.Sprintf(`{"id":"r%07d"}`, first+n)
		if b.Len()+len(row)+2 > size {
			break
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
		n++
	}
	b.WriteByte(']')
	return b.Bytes(), n
}

// hostileBigValues appends rows of '<' (six times as large HTML-escaped), then Lists them all.
func hostileBigValues(ctx context.Context, w *hostileWorker) ([]hostileCase, error) {
	fields := []map[string]any{{"name": "id", "type": "string"}, {"name": "text", "type": "string"}}
	if err := w.client.createStore(ctx, "big", fields); err != nil {
		return nil, err
	}
	text := strings.Repeat("<", w.sz.bigValue)
	var bodies [][]byte
	for first := 0; first < w.sz.bigRows; first += w.sz.bigPerAppend {
		var rows []map[string]string
		for i := first; i < min(first+w.sz.bigPerAppend, w.sz.bigRows); i++ {
			rows = append(rows, map[string]string{"id": fmt.Sprintf("b%04d", i), "text": text})
		}
		b, _ := json.Marshal(rows)
		// json.Marshal escapes '<' as \u003c; a client may as well send it raw.
		bodies = append(bodies, bytes.ReplaceAll(b, []byte(`\u003c`), []byte("<")))
	}
	appendReq := fmt.Sprintf("%d × append of %d rows of %d kB of '<'", len(bodies), w.sz.bigPerAppend, w.sz.bigValue/1000)
	ca := w.phase(ctx, "big_append", "big values: appends", appendReq, func(ctx context.Context) ([]answer, string, map[string]float64) {
		var as []answer
		for _, b := range bodies {
			a, _ := w.client.do(ctx, http.MethodPost, "/api/v1/stores/generic/big/rows", b)
			as = append(as, a)
		}
		return as, "", map[string]float64{"rows": float64(w.sz.bigRows)}
	})
	listReq := fmt.Sprintf("List limit=%d (every row), following next", w.sz.bigRows)
	cl := w.phase(ctx, "big_list", "big values: List of all", listReq, func(ctx context.Context) ([]answer, string, map[string]float64) {
		var as []answer
		after, rows, pages, bytesRead := "", 0, 0, 0
		for pages <= w.sz.bigRows {
			path := "/api/v1/stores/generic/big/rows?limit=" + strconv.Itoa(w.sz.bigRows)
			if after != "" {
				path += "&after=" + after
			}
			a, raw := w.client.do(ctx, http.MethodGet, path, nil)
			as = append(as, a)
			if !a.ok() {
				break
			}
			var page struct {
				Rows []json.RawMessage `json:"rows"`
				Next string            `json:"next"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				as[len(as)-1].Err = "bad page: " + err.Error()
				break
			}
			pages++
			rows += len(page.Rows)
			bytesRead += len(raw)
			if page.Next == "" || len(page.Rows) == 0 {
				break
			}
			after = page.Next
		}
		return as, fmt.Sprintf("%d rows in %d pages, %s of responses", rows, pages, fmtBytes(int64(bytesRead))),
			map[string]float64{"rows": float64(rows), "pages": float64(pages), "response_mib": mib(int64(bytesRead))}
	})
	return []hostileCase{ca, cl}, nil
}

// trickleEvery is the pace of a trickled body: one byte per connection this often.
const trickleEvery = 100 * time.Millisecond

// hostileConnections holds many idle connections and bodies trickled a byte at a time open, and
// probes whether the worker still answers.
func hostileConnections(ctx context.Context, w *hostileWorker) ([]hostileCase, error) {
	if err := w.client.createStore(ctx, "trickle", []map[string]any{{"name": "id", "type": "string"}}); err != nil {
		return nil, err
	}
	req := fmt.Sprintf("%d idle connections + %d appends trickling 1 byte per %s, held %s", w.sz.idleConns, w.sz.trickleConns, trickleEvery, w.sz.connHold)
	c := w.phase(ctx, "conns", "many connections", req, func(ctx context.Context) ([]answer, string, map[string]float64) {
		return siege(ctx, w.child.ready.Addr, w.sz.idleConns, w.sz.trickleConns, w.knobAtMost("max-body-bytes", 8<<20), w.sz.connHold)
	})
	return []hostileCase{c}, nil
}

// siege holds idle and trickling connections to addr open and probes /healthz meanwhile.
func siege(ctx context.Context, addr string, idle, trickling, contentLength int, hold time.Duration) ([]answer, string, map[string]float64) {
	start := time.Now()
	var d net.Dialer
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var idleConns []net.Conn
	dialFailed := 0
	for range idle {
		c, err := d.DialContext(dialCtx, "tcp", addr)
		if err != nil {
			dialFailed++
			continue
		}
		idleConns = append(idleConns, c)
	}
	defer func() {
		for _, c := range idleConns {
			_ = c.Close()
		}
	}()

	// Trickled appends: the whole header at once, then the body byte by byte.
	type trickler struct {
		conn     net.Conn
		answered atomic.Bool // the worker wrote something back (an error) or closed it
	}
	var ts []*trickler
	head := fmt.Sprintf("POST /api/v1/stores/generic/trickle/rows HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[", addr, contentLength)
	var readers sync.WaitGroup
	for range trickling {
		c, err := d.DialContext(dialCtx, "tcp", addr)
		if err != nil {
			dialFailed++
			continue
		}
		if _, err := io.WriteString(c, head); err != nil {
			_ = c.Close()
			dialFailed++
			continue
		}
		t := &trickler{conn: c}
		ts = append(ts, t)
		readers.Go(func() {
			_, _ = io.Copy(io.Discard, c)
			t.answered.Store(true)
		})
	}
	defer func() {
		for _, t := range ts {
			_ = t.conn.Close()
		}
		readers.Wait()
	}()
	opened := time.Since(start)

	// The probe: can a new client still get an answer?
	probe := answer{}
	probeDur := timed(func() {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		hc := newHostileClient(addr)
		defer hc.close()
		probe, _ = hc.do(pctx, http.MethodGet, "/healthz", nil)
	})

	body := trickleBody()
	tk := time.NewTicker(trickleEvery)
	defer tk.Stop()
	sent := 0
	for time.Since(start) < hold && ctx.Err() == nil {
		<-tk.C
		for _, t := range ts {
			if !t.answered.Load() {
				_, _ = t.conn.Write(body[sent%len(body) : sent%len(body)+1])
			}
		}
		sent++
	}

	closed := 0
	for _, c := range idleConns {
		if closedByPeer(c) {
			closed++
		}
	}
	answered := 0
	for _, t := range ts {
		if t.answered.Load() {
			answered++
		}
	}
	probeText := fmt.Sprintf("%s after %s", probe, fmtDur(probeDur))
	note := fmt.Sprintf("opened %d idle + %d trickling in %s (%d dials failed); /healthz probe: %s; after %s: %d/%d idle closed by the worker, %d/%d trickling answered or closed (%d bytes sent each)",
		len(idleConns), len(ts), fmtDur(opened), dialFailed, probeText, fmtDur(time.Since(start)), closed, len(idleConns), answered, len(ts), sent)
	counts := map[string]float64{"idle": float64(len(idleConns)), "trickling": float64(len(ts)), "dial_failed": float64(dialFailed),
		"idle_closed": float64(closed), "trickling_answered": float64(answered), "probe_ms": ms(probeDur)}
	return []answer{probe}, note, counts
}

// closedByPeer reports whether the worker closed c or wrote to it (a refusal).
func closedByPeer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// trickleBody is the JSON array a trickled append sends one byte at a time (after "[").
func trickleBody() []byte {
	var b []byte
	for i := range 1000 {
		b = fmt.Appendf(b, `{"id":"t%07d"},`, i)
	}
	return b
}
