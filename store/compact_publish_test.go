package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// A compaction whose base version lands while its writer is told it failed must not delete
// the run that version references: whether the error is the write's own (the reply was
// lost) or AlreadyExists (a retry of the landed write), the latest base then lists the
// output, and deleting it loses every row it holds.
func TestCompactionKeepsAnOutputItsLandedVersionReferences(t *testing.T) {
	for _, reply := range []string{"error", "already-exists"} {
		t.Run(reply, func(t *testing.T) {
			ctx := context.Background()
			url, want := threeRunStore(t, "cp")

			cdb := openTestDB(t, url, "compactor")
			var fired atomic.Bool
			cdb.bucket = cdb.bucket.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
				if op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") && err == nil && fired.CompareAndSwap(false, true) {
					if reply == "error" {
						return errors.New("injected: reply lost")
					}
					return fmt.Errorf("injected: %w", ErrAlreadyExists)
				}
				return err
			}})
			c := openGeneric(t, cdb, "cp")
			_, _ = c.CompactBase(ctx, CompactParams{MaxRuns: -1})
			require.True(t, fired.Load())

			reader := openGeneric(t, openTestDB(t, url, "r"), "cp")
			require.Equal(t, want, allRows(t, reader, SourceAll), "the landed version's rows are readable")
		})
	}
}

// A compaction pass whose context ends around its publish (its CompactBase cancelled or
// terminated: the activity learns it at a heartbeat) cleaned up with that context: a publish
// cut short left the whole output run, and a publish that landed left its inputs, each
// waiting for a compaction pass at least a day later, which a store whose base no longer
// needs compacting never runs. The clean-up runs on a context of its own.
func TestFindingCompactionCutAtItsPublishCleansUp(t *testing.T) {
	for _, when := range []string{"before-publish", "after-publish"} {
		t.Run(when, func(t *testing.T) {
			ctx := context.Background()
			url, want := threeRunStore(t, "cut")

			cdb := openTestDB(t, url, "compactor")
			pctx, cancel := context.WithCancel(ctx)
			defer cancel()
			var fired atomic.Bool
			versionPut := func(op, key string) bool {
				return op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") && fired.CompareAndSwap(false, true)
			}
			cdb.bucket = cdb.bucket.WithFaults(objstore.FaultFuncs{
				BeforeFunc: func(op, key string) error {
					if when == "before-publish" && versionPut(op, key) {
						cancel()
						return context.Canceled
					}
					return nil
				},
				AfterFunc: func(op, key string, err error) error {
					if when == "after-publish" && err == nil && versionPut(op, key) {
						cancel()
					}
					return err
				},
			})
			c := openGeneric(t, cdb, "cut")
			res, err := c.CompactBase(pctx, CompactParams{MaxRuns: -1})
			require.True(t, fired.Load())
			t.Logf("pass: committed %v, error %v", res.Committed, err)

			reader := openGeneric(t, openTestDB(t, url, "r"), "cut")
			require.Equal(t, want, allRows(t, reader, SourceAll))
			base := call(reader.loadBase(ctx)).must(t)
			objs := call(reader.db.bucket.List(ctx, dataPrefix(reader.target))).must(t)
			for _, o := range objs {
				require.True(t, base.References(o.Key), "%s is left on storage, referenced by no base", o.Key)
			}
		})
	}
}

// threeRunStore makes store name with three base runs (one merge each) and returns its URL and
// rows, for a compaction to work on from another DB.
func threeRunStore(t *testing.T, name string) (url string, rows map[string]int64) {
	t.Helper()
	url = newMemURL()
	s := createGeneric(t, openTestDB(t, url, "w1"), name, false)
	sealRuns(t, s, 3)
	return url, allRows(t, s, SourceAll)
}
