package s3test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// Gate is an S3 handler that holds chosen requests until the test releases them: the
// process-level counterpart of an objstore.Faults hook, for a test that must stop a real
// worker process (whose bucket lives in another process) at one exact step of the merge
// protocol, e.g. "the first PUT of a staged run of store X", without sleeping.
type Gate struct {
	next http.Handler

	mu    sync.Mutex
	holds []*Hold
}

// NewGate wraps next (usually NewHandler's handler).
func NewGate(next http.Handler) *Gate { return &Gate{next: next} }

// Hold is one armed rule: the first request (after Skip matching ones) whose method is
// Method and whose path contains every string of PathContains is held until Release.
type Hold struct {
	method   string
	contains []string
	skip     int

	hit     chan struct{} // closed when the request is held
	release chan struct{} // closed by Release
	done    chan struct{} // closed when the held request has been served
	once    sync.Once
	seen    int
}

// Hold arms a rule and returns it. skip matching requests pass before the one held.
func (g *Gate) Hold(method string, skip int, pathContains ...string) *Hold {
	h := &Hold{method: method, contains: pathContains, skip: skip, hit: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	g.mu.Lock()
	g.holds = append(g.holds, h)
	g.mu.Unlock()
	return h
}

// Hit is closed once the rule holds a request.
func (h *Hold) Hit() <-chan struct{} { return h.hit }

// Done is closed once the held request has been served (or its client gave up).
func (h *Hold) Done() <-chan struct{} { return h.done }

// Release lets the held request (and any later one) through; safe to call twice.
func (h *Hold) Release() { h.once.Do(func() { close(h.release) }) }

// ReleaseAll releases every rule, held or not (test clean-up).
func (g *Gate) ReleaseAll() {
	g.mu.Lock()
	holds := g.holds
	g.holds = nil
	g.mu.Unlock()
	for _, h := range holds {
		h.Release()
	}
}

// match picks the rule that holds r, if any, and disarms it.
func (g *Gate) match(r *http.Request) *Hold {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, h := range g.holds {
		misses := func(s string) bool { return !strings.Contains(r.URL.Path, s) }
		if h.method != r.Method || slices.ContainsFunc(h.contains, misses) {
			continue
		}
		if h.seen < h.skip {
			h.seen++
			continue
		}
		g.holds = append(g.holds[:i:i], g.holds[i+1:]...)
		return h
	}
	return nil
}

// ServeHTTP implements http.Handler.
func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := g.match(r)
	if h == nil {
		g.next.ServeHTTP(w, r)
		return
	}
	defer close(h.done)
	close(h.hit)
	select {
	case <-h.release:
	case <-r.Context().Done():
		return // the client gave up; the request never reached storage
	}
	g.next.ServeHTTP(w, r)
}
