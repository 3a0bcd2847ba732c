package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

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
