package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/walkeeper/walkeeper/internal/testkit/panictest"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

func TestMain(m *testing.M) { panictest.Main(m, store.RecoveredPanics) }

// A panic in a goroutine the store starts for a request (here a read's manifest loads, which
// run in an errgroup) is answered like the handler's own panic: 500 internal with a request
// id, logged with the panicking goroutine's stack and counted in walkeeper_http_panics_total,
// and the process serves the next request instead of ending.
func TestFindingStoreGoroutinePanicIsAnswered500Internal(t *testing.T) {
	cfg := testConfig(t)
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/rows", `[{"id":"a"}]`), http.StatusOK, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/flush", ``), http.StatusOK, "")

	// A second process's data plane over the same storage, whose bucket panics when a shard
	// manifest is read while armed.
	ctx := context.Background()
	raw, err := objstore.OpenBucket(ctx, cfg.Storage)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var armed atomic.Bool
	b := raw.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && strings.Contains(key, "/manifest/") && armed.Load() {
			panictest.Injected()
			panic("injected: a storage driver panicked")
		}
		return nil
	}})
	core, logs := observer.New(zapcore.DebugLevel)
	opts := cfg.StoreOptions()
	opts.InstanceID = "other"
	opts.Logger = zap.New(core)
	db := store.OpenDBOnBucket(b, opts)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	m := NewMetrics(nil)
	api := newAPIServer(db, cfg, w.ln.Addr(), zap.New(core), m, &mergeTriggers{})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c2 := &apiClient{t: t, base: srv.URL}

	before := store.RecoveredPanics()
	armed.Store(true)
	r := c2.get("/api/v1/stores/generic/gs/rows/a")
	expect(t, r, http.StatusInternalServerError, CodeInternal)
	require.NotContains(t, string(r.body), "injected")
	const route = "GET /api/v1/stores/{kind}/{name}/rows/{id}"
	require.Equal(t, 1.0, testutil.ToFloat64(m.httpPanics.WithLabelValues(route)))
	require.Equal(t, before+1, store.RecoveredPanics())
	lines := logs.FilterMessage("handler panicked").All()
	require.Len(t, lines, 1)
	f := lines[0].ContextMap()
	require.Equal(t, r.header.Get("X-Request-Id"), f["request_id"])
	require.Contains(t, f["panic"], "injected: a storage driver panicked")
	require.Contains(t, f["stack"], "errgroup", "the stack logged is the store goroutine's")
	require.Len(t, logs.FilterMessage("goroutine panicked").All(), 1)

	armed.Store(false)
	expect(t, c2.get("/api/v1/stores/generic/gs/rows/a"), http.StatusOK, "")
}
