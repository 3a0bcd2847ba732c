package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// hostileClient speaks the worker's HTTP API as a client would.
type hostileClient struct {
	base string
	hc   *http.Client
}

func newHostileClient(addr string) *hostileClient {
	return &hostileClient{base: "http://" + addr, hc: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 8,
		DisableCompression:  true,
	}}}
}

func (c *hostileClient) close() { c.hc.CloseIdleConnections() }

// answer is the status and error code of one request, or its transport error.
type answer struct {
	Status int
	Code   string
	Err    string
}

func (a answer) ok() bool { return a.Status >= 200 && a.Status < 300 }

func (a answer) String() string {
	switch {
	case a.Err != "":
		return "no answer (" + a.Err + ")"
	case a.Code != "":
		return fmt.Sprintf("%d %s", a.Status, a.Code)
	default:
		return fmt.Sprint(a.Status)
	}
}

// answers summarises a list of answers as "3 × 413 append_too_large, 1 × 200".
func answers(as []answer) string {
	counts := map[string]int{}
	for _, a := range as {
		counts[a.String()]++
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d × %s", counts[k], k))
	}
	return strings.Join(parts, ", ")
}

// do sends one request and returns the answer and, for a 2xx answer, the body.
func (c *hostileClient) do(ctx context.Context, method, path string, body []byte) (answer, []byte) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return answer{Err: err.Error()}, nil
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{Err: shortErr(err)}, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode}
	if err != nil {
		a.Err = shortErr(err)
		return a, nil
	}
	if !a.ok() {
		var e struct {
			Code string `json:"code"` // of an error body, {"code":"…","error":"…"}
		}
		_ = json.Unmarshal(raw, &e)
		a.Code = e.Code
		return a, nil
	}
	return a, raw
}

// createStore creates generic store name with fields (each {"name","type"[,"nullable"]}).
func (c *hostileClient) createStore(ctx context.Context, name string, fields []map[string]any) error {
	body, _ := json.Marshal(map[string]any{"fields": fields})
	a, _ := c.do(ctx, http.MethodPost, "/api/v1/stores/generic/"+name, body)
	if !a.ok() {
		return fmt.Errorf("create store %s: %s", name, a)
	}
	return nil
}

// pendingGenerations is the store's pending generations over all shards (stats route).
func (c *hostileClient) pendingGenerations(ctx context.Context, name string) (int, error) {
	a, raw := c.do(ctx, http.MethodGet, "/api/v1/stores/generic/"+name+"/stats", nil)
	if !a.ok() {
		return 0, fmt.Errorf("stats %s: %s", name, a)
	}
	var st struct {
		Totals struct {
			PendingGenerations int `json:"pending_generations"`
		} `json:"totals"` // over every shard, however many a page lists
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return 0, err
	}
	return st.Totals.PendingGenerations, nil
}

// shortErr is an error's last part, without the URL a transport error repeats.
func shortErr(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	return firstLine(s)
}

func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}
