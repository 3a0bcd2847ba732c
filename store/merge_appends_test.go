package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// stallGate holds the first storage call that matches until it is released, and says when
// one is held.
type stallGate struct {
	match   func(op, key string) bool
	once    sync.Once
	stalled chan struct{}
	release chan struct{}
}

// deadlockBound is how long a call may take before the test calls it stuck. It is a bound
// on waiting for a stalled merge, not a latency target: an append that does not wait on the
// merge returns in milliseconds, one that does never returns while the merge is held.
const deadlockBound = 30 * time.Second

// Appends and seals never wait on a merge of their store: a merge stalled in its prepare
// (writing the staged run), in its publish (the base version's put-if-absent) or in its
// finish (deleting merged generations) holds the store's merge lock at most shared, and
// neither appends nor seals take it. This is what keeps append latency flat while merges
// run, checked without timing anything.
func TestAppendsNeverWaitOnAStalledMerge(t *testing.T) {
	stallAt := map[string]func(op, key string) bool{
		"prepare: staged run write": func(op, key string) bool {
			return op == objstore.OpPut && strings.Contains(key, "/data/")
		},
		"publish: base version": func(op, key string) bool {
			return op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/")
		},
		"finish: generation delete": func(op, key string) bool {
			return op == objstore.OpDelete && strings.Contains(key, "/gen/")
		},
	}
	for _, name := range []string{"prepare: staged run write", "publish: base version", "finish: generation delete"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := openTestDB(t, newMemURL(), "w0")
			var gate atomic.Pointer[stallGate]
			db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
				if g := gate.Load(); g != nil && g.match(op, key) {
					g.once.Do(func() { close(g.stalled) })
					<-g.release
				}
				return nil
			}})
			s := createGeneric(t, db, "stall", false)
			sealGenerations(t, s, 4)

			g := &stallGate{match: stallAt[name], stalled: make(chan struct{}), release: make(chan struct{})}
			gate.Store(g)
			merged := make(chan error, 1)
			go func() {
				_, err := s.MergeOnce(ctx, "")
				merged <- err
			}()
			select {
			case <-g.stalled:
			case err := <-merged:
				t.Fatalf("the merge ended (%v) without reaching %s", err, name)
			case <-time.After(deadlockBound):
				t.Fatalf("the merge never reached %s", name)
			}

			wrote := make(chan error, 1)
			go func() {
				for i := range 3 {
					if _, err := s.Append(ctx, []Row{row(fmt.Sprintf("during-%d", i), int64(i))}); err != nil {
						wrote <- err
						return
					}
				}
				_, err := s.Flush(ctx)
				wrote <- err
			}()
			select {
			case err := <-wrote:
				require.NoError(t, err)
			case <-time.After(deadlockBound):
				close(g.release)
				t.Fatalf("appends and a seal waited on a merge stalled at %s", name)
			}

			close(g.release)
			require.NoError(t, <-merged)
			for i := range 3 {
				require.EqualValues(t, i, call(s.Get(ctx, fmt.Sprintf("during-%d", i))).must(t)["n"])
			}
		})
	}
}
