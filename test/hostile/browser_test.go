package hostile

import (
	"fmt"
	"net"
	"net/http"
	"testing"
)

// A worker without a token on a loopback address is reachable from any web page the
// machine's browser opens. A state-changing request that a browser marks as coming from
// another site (a foreign Origin, Sec-Fetch-Site cross-site or same-site) is 403
// cross_origin, and one whose Host is not a loopback name (DNS rebinding) is 403
// host_not_allowed; none creates anything. Same-origin requests and plain clients that send
// no Origin (curl, the CLI) work as before.
func TestBrowserRequestsAreRefused(t *testing.T) {
	w := startWorker(t, defaultConfig())
	w.mustOK(t, http.MethodPost, "/api/v1/stores/rollout/victim", nil)
	w.mustOK(t, http.MethodPost, "/api/v1/stores/rollout/victim/rows", []byte(`[{"id":"r1"}]`))
	before := w.listing(t)

	// Each refused create names a store of its own, so one that slips through does not
	// hide the next behind already_exists.
	refused := []struct {
		what   string
		method string
		path   string
		hdr    map[string]string
		code   string
	}{
		{"foreign Origin", http.MethodPost, "/api/v1/stores/rollout/x1", map[string]string{"Origin": "https://evil.example"}, "cross_origin"},
		{"Origin null", http.MethodPost, "/api/v1/stores/rollout/x2", map[string]string{"Origin": "null"}, "cross_origin"},
		{"Sec-Fetch-Site cross-site", http.MethodPost, "/api/v1/stores/rollout/x3", map[string]string{"Sec-Fetch-Site": "cross-site"}, "cross_origin"},
		{"Sec-Fetch-Site same-site", http.MethodPost, "/api/v1/stores/rollout/x4", map[string]string{"Sec-Fetch-Site": "same-site"}, "cross_origin"},
		{"foreign Host", http.MethodPost, "/api/v1/stores/rollout/x5", map[string]string{"Host": "evil.example"}, "host_not_allowed"},
		{"foreign Host with the port", http.MethodPost, "/api/v1/stores/rollout/x6", map[string]string{"Host": "evil.example:" + w.port()}, "host_not_allowed"},
		{"foreign Origin on a delete", http.MethodDelete, "/api/v1/stores/rollout/victim/rows/r1", map[string]string{"Origin": "https://evil.example"}, "cross_origin"},
		{"foreign Host on a read", http.MethodGet, "/api/v1/stores/rollout/victim/rows/r1", map[string]string{"Host": "evil.example"}, "host_not_allowed"},
	}
	for _, tc := range refused {
		r := w.call(t, tc.method, tc.path, nil, tc.hdr)
		expectError(t, r, http.StatusForbidden, tc.code, tc.what)
	}
	for i := 1; i <= 6; i++ {
		if r := w.call(t, http.MethodGet, fmt.Sprintf("/api/v1/stores/rollout/x%d/stats", i), nil, nil); r.Status != http.StatusNotFound {
			t.Errorf("after the refused create, rollout:x%d exists (stats: %s)", i, r)
		}
	}
	w.checkNothingWritten(t, before, "the refused browser requests")

	allowed := []struct {
		what string
		name string
		hdr  map[string]string
	}{
		{"no Origin (curl)", "plain", nil},
		{"same Origin", "same", map[string]string{"Origin": "http://" + w.listen}},
		{"Sec-Fetch-Site same-origin", "fetch", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + w.listen}},
		{"Sec-Fetch-Site none (typed by the user)", "typed", map[string]string{"Sec-Fetch-Site": "none"}},
		{"Host localhost", "local", map[string]string{"Host": "localhost:" + w.port()}},
	}
	for _, tc := range allowed {
		r := w.call(t, http.MethodPost, "/api/v1/stores/rollout/"+tc.name, nil, tc.hdr)
		if r.Status != http.StatusCreated {
			t.Errorf("%s: create rollout:%s: %s, want 201", tc.what, tc.name, r)
		}
	}
}

func (w *worker) port() string {
	_, p, _ := net.SplitHostPort(w.listen)
	return p
}
