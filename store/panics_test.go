package store

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/btree"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/panictest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

func TestMain(m *testing.M) { panictest.Main(m, RecoveredPanics) }

// panicOn is a fault that panics once on the first operation op on a key containing part
// while armed.
func panicOn(op, part string, armed *atomic.Bool) objstore.FaultFuncs {
	return objstore.FaultFuncs{BeforeFunc: func(o, key string) error {
		if o == op && strings.Contains(key, part) && armed.CompareAndSwap(true, false) {
			panictest.Injected()
			panic("injected: a storage driver panicked on " + key)
		}
		return nil
	}}
}

// A panic while the WAL committer writes a group commit answered nobody and ended the process;
// now the appends of the batch fail with a *PanicError, the writer is killed, and the next
// append claims the shard again and is acknowledged.
func TestFindingAPanicInTheWALCommitterFailsItsAppends(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	db := openTestDB(t, fmt.Sprintf("mem://panic-commit-%d", testURLSeq.Add(1)), "w")
	db.bucket = db.bucket.WithFaults(panicOn(objstore.OpPutIfAbsent, "/wal/", &armed))
	s := createGeneric(t, db, "panics", false)
	call(s.Append(ctx, []Row{{Key: "a", Values: []any{"a", int64(1), "x"}}})).must(t)

	before := RecoveredPanics()
	armed.Store(true)
	_, err := s.Append(ctx, []Row{{Key: "b", Values: []any{"b", int64(2), "x"}}})
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "WAL group commit", pe.Where)
	require.Contains(t, string(pe.Stack), "walGroupCommit")
	require.Equal(t, before+1, RecoveredPanics())

	call(s.Append(ctx, []Row{{Key: "c", Values: []any{"c", int64(3), "x"}}})).must(t)
	for _, k := range []string{"a", "c"} {
		require.NoError(t, errOf(s.Get(ctx, k)), k)
	}
}

// A panic in one of a read's manifest loads, which run in goroutines of their own, ended the
// process; now the read fails with a *PanicError and the next read succeeds.
func TestFindingAPanicInAReadGoroutineFailsTheRead(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	url := fmt.Sprintf("mem://panic-read-%d", testURLSeq.Add(1))
	w := openTestDB(t, url, "w")
	s := createGeneric(t, w, "panics", false)
	call(s.Append(ctx, []Row{{Key: "a", Values: []any{"a", int64(1), "x"}}})).must(t)
	flush(t, s)

	r := openTestDB(t, url, "r")
	r.bucket = r.bucket.WithFaults(panicOn(objstore.OpGet, "/manifest/", &armed))
	rs := openGeneric(t, r, "panics")
	armed.Store(true)
	_, err := rs.List(ctx, ListOptions{Source: SourceAll, Limit: 10})
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.False(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound), "a panic carries no mark: %v", err)
	require.Len(t, call(rs.List(ctx, ListOptions{Source: SourceAll, Limit: 10})).must(t).Rows, 1)
}

// A panic while the WAL committer held the writer's mutex (its clock, or the memtable's add)
// left the mutex locked, and the recovery's kill waited for it for ever: the batch was never
// answered and every later append and read of the shard hung. Now the mutex is released as
// the panic unwinds and the batch fails with the *PanicError.
func TestFindingAPanicUnderTheWritersMutexFailsItsAppends(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	db := openTestDB(t, fmt.Sprintf("mem://panic-locked-%d", testURLSeq.Add(1)), "w", func(o *Options) {
		o.Now = func() time.Time {
			if armed.Load() && strings.Contains(string(debug.Stack()), "nextSeqLocked") && armed.CompareAndSwap(true, false) {
				panictest.Injected()
				panic("injected: the clock panicked under the writer's mutex")
			}
			return time.Now()
		}
	})
	s := createGeneric(t, db, "panics", false)
	call(s.Append(ctx, []Row{{Key: "a", Values: []any{"a", int64(1), "x"}}})).must(t)

	armed.Store(true)
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.Append(actx, []Row{{Key: "b", Values: []any{"b", int64(2), "x"}}})
	var pe *PanicError
	require.ErrorAs(t, err, &pe, "the batch must be answered with the panic, not left waiting")

	require.NoError(t, errOf(s.Append(actx, []Row{{Key: "c", Values: []any{"c", int64(3), "x"}}})))
	require.NoError(t, errOf(s.Get(actx, "c")))
}

// A panic while the WAL committer added a durable batch to the active memtable left the rows
// added before it there, and the writer it killed stays the one this process reads until a
// successor replays its WAL: a reader saw part of a batch whose append had failed. Now the
// batch goes into the memtable whole or not at all. The panic comes from the index's key
// comparison, on the batch's second key.
func TestFindingAPanicInTheMemtableAddLeavesNoHalfBatch(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, fmt.Sprintf("mem://panic-add-%d", testURLSeq.Add(1)), "w")
	s := createGeneric(t, db, "panics", false)
	call(s.Append(ctx, []Row{{Key: "a", Values: []any{"a", int64(1), "x"}}})).must(t)

	var armed atomic.Bool
	w, err := s.writer(ctx)
	require.NoError(t, err)
	w.mu.Lock()
	index := btree.NewG(memtableDegree, func(x, y *memEntry) bool {
		if (x.key == "c" || y.key == "c") && armed.CompareAndSwap(true, false) {
			panictest.Injected()
			panic("injected: the memtable's index panicked adding c")
		}
		return x.key < y.key
	})
	w.active.index.Ascend(func(e *memEntry) bool {
		index.ReplaceOrInsert(e)
		return true
	})
	w.active.index, w.active.view = index, nil
	w.mu.Unlock()

	armed.Store(true)
	_, err = s.Append(ctx, []Row{{Key: "b", Values: []any{"b", int64(2), "x"}}, {Key: "c", Values: []any{"c", int64(3), "x"}}})
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.False(t, armed.Load(), "the add of c panicked")

	require.ErrorIs(t, errOf(s.Get(ctx, "b")), ErrNotFound, "b came in the same batch as c, which no reader sees yet")
	require.Equal(t, map[string]int64{"a": 1}, allRows(t, s, SourceAll))

	// The next append claims the shard and replays the whole batch from the WAL.
	call(s.Append(ctx, []Row{{Key: "d", Values: []any{"d", int64(4), "x"}}})).must(t)
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4}, allRows(t, s, SourceAll))
}
