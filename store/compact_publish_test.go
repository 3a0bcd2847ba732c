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
			url := newMemURL()
			db := openTestDB(t, url, "w1")
			s := createGeneric(t, db, "cp", false)
			for i := range 3 {
				seal(t, s, row(fmt.Sprintf("k%d", i), int64(i)))
				_, err := s.MergeAll(ctx)
				require.NoError(t, err)
			}
			want := allRows(t, s, SourceAll)

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
