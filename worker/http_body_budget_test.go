package worker

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Request bodies being read share --body-budget-bytes: while one body holds all of it, another
// request waits briefly and gets 503 budget_busy with Retry-After, having written nothing, and
// once the first body is read and decoded the bytes are free again.
func TestHTTPBodiesShareTheBodyBudget(t *testing.T) {
	defer func(d time.Duration) { budgetWait = d }(budgetWait)
	budgetWait = 100 * time.Millisecond
	cfg := testConfig(t)
	cfg.MaxBodyBytes, cfg.BodyBudgetBytes = 1024, 1024
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	rows := "/api/v1/stores/generic/gs/rows"

	// A client that sends its headers and a part of a 1024-byte body, then stalls.
	held := `[{"id":"held","s":"` + strings.Repeat("x", 1024-len(`[{"id":"held","s":""}]`)) + `"}]`
	require.Len(t, held, 1024)
	conn := rawConn(t, w)
	_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1024\r\n\r\n%s",
		rows, w.HTTPAddr(), held[:10])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !w.api.bodies.free(1) }, 10*time.Second, 10*time.Millisecond, "the stalled body holds the whole budget")

	r := c.postJSON(rows, `[{"id":"a"}]`)
	expect(t, r, http.StatusServiceUnavailable, CodeBudgetBusy)
	require.NotEmpty(t, r.header.Get("Retry-After"))
	expect(t, c.get(rows+"/a"), http.StatusNotFound, CodeRowNotFound)

	_, err = conn.Write([]byte(held[10:]))
	require.NoError(t, err)
	line := make([]byte, len("HTTP/1.1 200"))
	_, err = io.ReadFull(conn, line)
	require.NoError(t, err)
	require.Equal(t, "HTTP/1.1 200", string(line))
	expect(t, c.postJSON(rows, `[{"id":"a"}]`), http.StatusOK, "")
	expect(t, c.get(rows+"/a"), http.StatusOK, "")
	expect(t, c.get(rows+"/held"), http.StatusOK, "")
}
