package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// rawConn dials the worker's listener for tests that speak HTTP/1.1 by hand.
func rawConn(t *testing.T, w *Worker) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", w.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// closedByServer waits up to within for the server to close conn: true when it did, false
// when the wait ran out first.
func closedByServer(t *testing.T, conn net.Conn, within time.Duration) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, conn)
	if err == nil || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	t.Fatalf("reading from the worker: %v", err)
	return false
}

// A client that sends the headers and one byte of a larger body is cut off by
// --http-read-timeout, not served for ever.
func TestHTTPReadTimeoutCutsOffATrickledBody(t *testing.T) {
	cfg := testConfig(t)
	cfg.HTTPReadTimeout = 2 * time.Second // covers the headers too: room for a loaded machine to send them
	w := startWorker(t, cfg, nil)
	start := time.Now() // the server's read timeout starts after this, when it accepts
	conn := rawConn(t, w)
	_, err := fmt.Fprintf(conn, "POST /api/v1/stores/generic/gs/rows HTTP/1.1\r\nHost: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n[", w.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := readAnswer(conn, bufio.NewReader(conn), "POST", 30*time.Second); err != nil || r.status != http.StatusBadRequest {
		t.Fatalf("stalled body: %d %v, want 400", r.status, err)
	}
	if !closedByServer(t, conn, 30*time.Second) {
		t.Fatal("the worker still holds a connection whose body stalled 30 s ago")
	}
	if d := time.Since(start); d < cfg.HTTPReadTimeout {
		t.Fatalf("closed after %s, before the read timeout %s", d, cfg.HTTPReadTimeout)
	}
}

// Headers over 64 KiB are refused (431) instead of buffered up to Go's default of 1 MiB.
func TestHTTPRefusesHugeHeaders(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	conn := rawConn(t, w)
	go func() {
		_, _ = fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", w.HTTPAddr(), strings.Repeat("a", 100<<10))
	}()
	if r, err := readAnswer(conn, bufio.NewReader(conn), "GET", 30*time.Second); err != nil || r.status != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d %v, want 431", r.status, err)
	}
}

// readAnswer reads, within the given time, the whole answer on conn (read through br) to a
// request of method.
func readAnswer(conn net.Conn, br *bufio.Reader, method string, within time.Duration) (resp, error) {
	_ = conn.SetReadDeadline(time.Now().Add(within))
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body) // a server that closes after its answer may reset the rest
	return resp{status: res.StatusCode, header: res.Header, body: body}, nil
}

// rawGet sends GET path on a kept-alive raw connection and returns the status.
func rawGet(conn net.Conn, br *bufio.Reader, host, path string, within time.Duration) (int, error) {
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host); err != nil {
		return 0, err
	}
	r, err := readAnswer(conn, br, "GET", within)
	return r.status, err
}

// --max-connections bounds the open connections: with two held, a third is not served until
// one of them closes.
func TestHTTPMaxConnections(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxConnections = 2
	w := startWorker(t, cfg, nil)
	host := w.HTTPAddr()
	var held []net.Conn
	for range 2 {
		conn := rawConn(t, w)
		if st, err := rawGet(conn, bufio.NewReader(conn), host, "/healthz", 30*time.Second); err != nil || st != http.StatusOK {
			t.Fatalf("held connection: %d %v", st, err)
		}
		held = append(held, conn)
	}
	third := rawConn(t, w)
	br := bufio.NewReader(third)
	if st, err := rawGet(third, br, host, "/healthz", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a third connection over --max-connections 2 was served: %d %v", st, err)
	}
	_ = held[0].Close()
	if r, err := readAnswer(third, br, "GET", 30*time.Second); err != nil || r.status != http.StatusOK {
		t.Fatalf("the third connection is not served once one closed: %d %v", r.status, err)
	}
}

// merge-wal?wait=true outlives both timeouts: the answer gets a fresh write deadline after the
// wait, and the read deadline (which net/http clears once the request is read) does not cancel
// the wait.
func TestHTTPMergeWaitOutlivesTheTimeouts(t *testing.T) {
	cfg := testConfig(t)
	// Timeouts of 1 s leave a loaded machine room to read the request and write the answer;
	// the wait outlasts both three times.
	cfg.HTTPReadTimeout = time.Second
	cfg.HTTPWriteTimeout = time.Second
	w := startWorker(t, cfg, startsRun(fakeRun{result: contract.MergeWalResult{Reclaimed: 1}, delay: 3 * time.Second}))
	c := newClient(t, w)
	// Created directly: a busy machine may take longer than these timeouts to answer a create.
	if _, err := w.DB().Create(context.Background(), store.Target{Kind: store.KindRollout, Name: "ro"}, store.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"", `{"max_passes":2}`} {
		r := c.postJSON("/api/v1/stores/rollout/ro/merge-wal?wait=true", body)
		expect(t, r, http.StatusOK, "")
		if res, _ := r.json(t)["result"].(map[string]any); res == nil || res["reclaimed"] != float64(1) {
			t.Fatalf("merge-wal?wait=true with body %q: %s", body, r.body)
		}
	}
}

// No answer is compressed, whatever Accept-Encoding asks: a compressor holds hundreds of KiB
// per request, which no budget counts. /metrics, whose handler would gzip, answers plain text.
func TestHTTPAnswersAreNotCompressed(t *testing.T) {
	w, c, _ := serveAPI(t, testConfig(t))
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	for _, path := range []string{"/metrics", "/healthz", "/api/v1/stores", "/api/v1/stores/generic/gs/rows", "/api/v1/stores/generic/gs/stats", "/nope"} {
		for _, enc := range []string{"gzip", "gzip, deflate, br, zstd", "*"} {
			// Set by hand, so the client does not decompress.
			r := sendWith(t, w, http.MethodGet, path, "", map[string]string{"Accept-Encoding": enc})
			if ce := r.header.Get("Content-Encoding"); ce != "" {
				t.Fatalf("%s with Accept-Encoding %q: Content-Encoding %q", path, enc, ce)
			}
			if path == "/metrics" && !strings.Contains(string(r.body), "walkeeper_http_requests_total") {
				t.Fatalf("%s with Accept-Encoding %q: not the text exposition: %.80q", path, enc, r.body)
			}
		}
	}
}

// A request whose target is "*" (asterisk form, meant for OPTIONS) reaches the router with any
// other method; it is no route, 404 not_found in JSON like any other, not the router's own
// empty 400.
func TestHTTPAsteriskTargetIsJSONNotFound(t *testing.T) {
	w := startWorker(t, testConfig(t), nil)
	for _, method := range []string{"GET", "HEAD", "POST", "DELETE"} {
		conn := rawConn(t, w)
		if _, err := fmt.Fprintf(conn, "%s * HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", method); err != nil {
			t.Fatal(err)
		}
		r, err := readAnswer(conn, bufio.NewReader(conn), method, 30*time.Second)
		if err != nil || r.status != http.StatusNotFound || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s *: %d %q %q %v", method, r.status, r.header.Get("Content-Type"), r.body, err)
		}
		if method != "HEAD" && !strings.Contains(string(r.body), `"code":"not_found"`) {
			t.Fatalf("%s *: %s", method, r.body)
		}
	}
}
