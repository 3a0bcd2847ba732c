package activities

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// injectedPanics counts the panics tests injected on purpose; TestMain fails the package when
// a goroutine recovered any other, so recovering never hides a bug from the tests.
var injectedPanics atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if got, want := store.RecoveredPanics(), injectedPanics.Load(); code == 0 && got != want {
		fmt.Fprintf(os.Stderr, "FAIL: goroutines recovered %d panics, %d of them injected (see 'goroutine panicked' in the logs)\n", got, want)
		code = 1
	}
	os.Exit(code)
}

// ReconcilePage reconciles stores in goroutines of its own, where the SDK's recovery of an
// activity's panic does not reach: a panic in one (here the storage driver's) ended the
// process. Now that store is one the page could not read, with an Internal error, and the
// panic is counted.
func TestFindingAPanicInAReconcileGoroutineIsAnUnreadableStore(t *testing.T) {
	ctx := context.Background()
	url := memURL(t)
	seal(t, openDB(t, url, "w1"), "generic:a", []string{"k"})
	raw, err := objstore.OpenBucket(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	var armed atomic.Bool
	armed.Store(true)
	b := raw.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if !strings.HasPrefix(key, "_registry/") && armed.CompareAndSwap(true, false) {
			injectedPanics.Add(1)
			panic("injected: a storage driver panicked on " + key)
		}
		return nil
	}})
	opts := store.DefaultOptions()
	opts.InstanceID = "w2"
	db := store.OpenDBOnBucket(b, opts)
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	before := store.RecoveredPanics()
	res := mustRun[contract.ReconcilePageResult](t, activityEnv(t, &Activities{DB: db}), contract.ReconcilePageActivity,
		contract.ReconcilePageParams{Kind: "generic", Limit: 10})
	require.False(t, armed.Load(), "the fault was reached")
	require.Equal(t, 1, res.Counts.Unreadable, "%+v", res)
	require.Equal(t, contract.ErrTypeInternal, res.Problems[0].ErrorType)
	require.Contains(t, res.Problems[0].Error, "injected")
	require.Equal(t, before+1, store.RecoveredPanics())
}
