package worker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// A create whose registry entry was not written (its process died, or the put failed, after
// store.json landed; or it is still in flight in another worker) leaves a name that reads as
// no store. A create of that name with another schema is refused, and said so: 409
// schema_mismatch, as for a store that exists with another schema, never 409 already_exists,
// which tells the client the store it asked for is there.
func TestFindingCreateOverAHalfCreatedStoreOfAnotherSchemaIsSchemaMismatch(t *testing.T) {
	cfg := testConfig(t)
	ctx := context.Background()
	raw, err := objstore.OpenBucket(ctx, cfg.Storage)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var failRegistry atomic.Bool
	failRegistry.Store(true)
	b := raw.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpPutIfAbsent && strings.HasPrefix(key, "_registry/") && failRegistry.Load() {
			return errors.New("injected: the registry put failed")
		}
		return nil
	}})
	db := store.OpenDBOnBucket(b, cfg.StoreOptions())
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	api := newAPIServer(db, cfg, &stubAddr{}, zaptest.NewLogger(t), NewMetrics(nil), &mergeTriggers{})
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	c := &apiClient{t: t, base: srv.URL}

	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusInternalServerError, CodeInternal)
	failRegistry.Store(false)
	expect(t, c.get("/api/v1/stores/generic/gs/rows"), http.StatusNotFound, CodeStoreNotFound)

	other := `{"fields":[{"name":"id","type":"string"},{"name":"x","type":"float64","nullable":true}]}`
	expect(t, c.postJSON("/api/v1/stores/generic/gs", other), http.StatusConflict, CodeSchemaMismatch)
	expect(t, c.get("/api/v1/stores/generic/gs/rows"), http.StatusNotFound, CodeStoreNotFound)
	// The create it was asked for first finishes it, as before.
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	expect(t, c.get("/api/v1/stores/generic/gs/rows"), http.StatusOK, "")
}

// stubAddr is a loopback TCP address for a data plane served by httptest.
type stubAddr struct{}

func (*stubAddr) Network() string { return "tcp" }
func (*stubAddr) String() string  { return "127.0.0.1:0" }
