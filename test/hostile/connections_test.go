package hostile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Connection settings of this test's worker.
const (
	readTimeout    = 2 * time.Second
	maxConnections = 16
	// maxLogLine bounds one line of the worker's log: a few KB of message, fields and a
	// stack trace, never a request's megabyte.
	maxLogLine = 16 * 1024
)

// internalMessage is the only message a 500 internal may carry.
var internalMessage = regexp.MustCompile(`^internal error; see the worker log \(request id [^()\s]+\)$`)

// Connections are a budget too: a client that trickles a body is cut off after
// --http-read-timeout, idle connections beyond --max-connections are not accepted (and the
// read timeout frees the accepted ones, so a new client is served), a megabyte of path is
// refused by the header limit without reaching the log, and a 500 says nothing of the
// internal error but where to find it.
func TestConnectionLimits(t *testing.T) {
	cfg := defaultConfig()
	cfg.Knobs = map[string]string{"http-read-timeout": readTimeout.String(), "max-connections": strconv.Itoa(maxConnections)}
	w := startWorker(t, cfg)
	w.createGeneric(t, "conn", []field{idField}, nil)
	w.mustOK(t, http.MethodPost, rowsPath("conn"), []byte(`[{"id":"a"}]`))
	before := w.listing(t)
	// healthy asserts that a new client (what) is served /healthz within d.
	healthy := func(t *testing.T, what string, d time.Duration) {
		t.Helper()
		start := time.Now()
		if r, err := w.do(http.MethodGet, "/healthz", nil, nil); err != nil || r.Status != http.StatusOK {
			t.Errorf("%s: %v %s", what, err, r)
		} else if took := time.Since(start); took > d {
			t.Errorf("%s was served only after %s", what, took)
		}
	}

	t.Run("a body trickled too slowly is cut off", func(t *testing.T) {
		conn, err := net.Dial("tcp", w.listen)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n[",
			rowsPath("conn"), w.listen, 100*1024)
		start := time.Now()
		_ = conn.SetReadDeadline(start.Add(10 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		took := time.Since(start)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("the worker still holds a connection that sent 1 byte of a 100 KB body after %s (--http-read-timeout %s)", took.Round(time.Millisecond), readTimeout)
		} else {
			t.Logf("the worker closed the connection after %s", took.Round(time.Millisecond))
		}
	})

	t.Run("idle connections beyond the limit", func(t *testing.T) {
		const idle = maxConnections + 8
		conns := make([]net.Conn, 0, idle)
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for range idle {
			c, err := net.Dial("tcp", w.listen)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			conns = append(conns, c)
		}
		time.Sleep(300 * time.Millisecond)
		if n, err := acceptedConns(w.pid(), w.listen); err != nil {
			t.Error(err)
		} else if n > maxConnections {
			t.Errorf("the worker accepted %d idle connections, more than --max-connections %d", n, maxConnections)
		} else {
			t.Logf("%d idle connections open, the worker accepted %d", idle, n)
		}
		// The server's timeouts free the accepted ones (the read timeout, or a header timeout
		// of its own), so a new client is served meanwhile, if not at once.
		healthy(t, fmt.Sprintf("a new client next to %d idle connections", idle), 30*time.Second)
		for _, c := range conns {
			_ = c.Close()
		}
		conns = nil
		healthy(t, "a new client once the idle connections closed", 5*time.Second)
	})

	t.Run("a megabyte of path", func(t *testing.T) {
		// Past the 64 KiB header limit the server answers 431 and closes while the client
		// is still sending, so the answer may be lost to a reset: either is a refusal.
		r, err := w.do(http.MethodGet, "/api/v1/"+strings.Repeat("p", 1<<20), nil, nil)
		if err == nil && r.Status/100 != 4 {
			t.Errorf("a 1 MB path: %s, want a 4xx", r)
		}
		// Under the header limit the request reaches the router, whose 404 and log line
		// must not carry the path whole.
		r, err = w.do(http.MethodGet, "/api/v1/"+strings.Repeat("q", 60<<10), nil, nil)
		if err != nil {
			t.Fatalf("a 60 KiB path: no answer: %v", err)
		}
		if r.Status/100 != 4 || len(r.Body) > maxLogLine {
			t.Errorf("a 60 KiB path: %d with a %d-byte body, want a short 4xx", r.Status, len(r.Body))
		}
		if r, err := w.do(http.MethodGet, "/healthz", nil, nil); err != nil || r.Status != http.StatusOK {
			t.Fatalf("after the long paths the worker does not answer /healthz: %v %s", err, r)
		}
		longest, err := longestLogLine(w.logPath)
		if err != nil {
			t.Fatal(err)
		}
		if longest > maxLogLine {
			t.Errorf("the worker's log has a line of %d bytes (bound %d): a request's path or body reached the log", longest, maxLogLine)
		}
	})

	t.Run("a 500 carries no internal text", func(t *testing.T) {
		// A symbolic link to itself where the store's folder goes: creating the store fails
		// with an error (ELOOP) that names the storage path, which the answer must not
		// repeat. Unlike file permissions, this holds for a test run as root too.
		if err := os.MkdirAll(filepath.Join(w.root, "generic"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("broken", filepath.Join(w.root, "generic", "broken")); err != nil {
			t.Fatal(err)
		}
		before["generic/broken"] = int64(len("broken"))
		r := w.call(t, http.MethodPost, "/api/v1/stores/generic/broken", jsonBody(t, map[string]any{"fields": []field{idField}}), nil)
		if r.Status != http.StatusInternalServerError {
			t.Fatalf("create over a link loop: %s, want a 500", r)
		}
		expectError(t, r, http.StatusInternalServerError, "internal", "create over a link loop")
		if _, msg := r.errorFields(); !internalMessage.MatchString(msg) || strings.Contains(string(r.Body), w.root) {
			t.Errorf("the 500 says %q; want only %q", msg, "internal error; see the worker log (request id <id>)")
		}
	})

	// The registry entry a failed create may leave is its own business; anything else is not.
	w.checkNothingWritten(t, before, "the refused requests", "_registry/generic/broken")
}

// acceptedConns counts the TCP connections to listen that process pid has accepted (its
// socket descriptors with that local port, the listener aside). Connections the kernel
// completed but the process has not accepted have no descriptor and are not counted. It
// counts distinct socket inodes, not lines: the kernel writes the table a chunk per read and
// resumes by position, so a socket opened by any process of the namespace between two reads
// can make it list one of ours twice.
func acceptedConns(pid int, listen string) (int, error) {
	_, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return 0, err
	}
	port, _ := strconv.Atoi(portStr)
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	accepted := map[string]bool{}
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			cols := strings.Fields(sc.Text())
			if len(cols) < 10 || cols[0] == "sl" || cols[3] == "0A" || !inodes[cols[9]] {
				continue // header, listener, or not this process's socket
			}
			_, hexPort, ok := strings.Cut(cols[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				accepted[cols[9]] = true
			}
		}
		_ = f.Close()
	}
	return len(accepted), nil
}

// longestLogLine is the length of the longest line in the file.
func longestLogLine(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	longest, cur := 0, 0
	for {
		chunk, isPrefix, err := r.ReadLine()
		cur += len(chunk)
		if !isPrefix {
			longest = max(longest, cur)
			cur = 0
		}
		if err == io.EOF {
			return max(longest, cur), nil
		}
		if err != nil {
			return 0, err
		}
	}
}
