package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// The read limit with the default settings, the number docs/FORMAT.md §1 gives: two 64 MiB
// memtables of appends, 8,192 tombstones of 5,176 bytes and 1 MiB of encoding.
func TestWALReadLimitOfTheDefaults(t *testing.T) {
	db := openTestDB(t, newMemURL(), "w")
	require.Equal(t, int64(5176), int64(rowcodec.MaxTombstoneBytes))
	require.Equal(t, int64(177_668_096), db.walReadLimit())
}

// lastWAL returns the key and bytes of the newest WAL object of s's shard in db.
func lastWAL(t *testing.T, db *DB, s *Store) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	objs, err := db.bucket.List(ctx, walPrefix(s.target, db.Shard()))
	require.NoError(t, err)
	key := objs[len(objs)-1].Key
	return key, getObject(t, db.bucket, key)
}

// A WAL object was read whole whatever its size. Now a restarted owner whose WAL holds an
// object one byte over the read limit refuses it as a damaged WAL object, and replays one of
// exactly the limit.
func TestFindingWALObjectOverTheReadLimitIsDamaged(t *testing.T) {
	ctx := context.Background()
	root := "file://" + t.TempDir()
	db, s := newGenericStore(t, root, "wl")
	appendRows(t, s, row("a", 1))
	appendRows(t, s, row("bbbbbbbbbbbbbbbb", 2)) // the largest object, so the only one over
	key, data := lastWAL(t, db, s)
	limit := int64(len(data))

	over := openTestDB(t, root, "w1", func(o *Options) { o.maxWALBytes = limit - 1 })
	so := openGeneric(t, over, "wl")
	_, err := so.Append(ctx, []Row{row("c", 3)})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, key)
	require.ErrorContains(t, err, "longer than")
	require.Equal(t, 1.0, testutil.ToFloat64(over.metrics.CorruptObjects.WithLabelValues(string(KindGeneric))))
	require.Equal(t, []string{key}, over.damaged.under(walPrefix(so.target, over.Shard())), "remembered as a damaged WAL object")

	at := openTestDB(t, root, "w1", func(o *Options) { o.maxWALBytes = limit })
	sa := openGeneric(t, at, "wl")
	appendRows(t, sa, row("c", 3))
	require.Equal(t, map[string]int64{"a": 1, "bbbbbbbbbbbbbbbb": 2, "c": 3}, allRows(t, sa, SourceAll))
}

// A stray object of 16 GiB in a shard's WAL was read whole by the owner's claim, or by the
// live writer whose next position it took, which no worker survives. Now, with the default
// limit, both refuse it without reading it, in a process that could not hold it; quarantine
// sets it aside as any damaged WAL object, and a release refuses to put it back.
func TestFindingHugeStrayWALObjectCostsNoMemoryUnderAMemoryLimit(t *testing.T) {
	if !underMemoryLimit(t, 3<<30) {
		return
	}
	ctx := context.Background()
	dir := t.TempDir()
	root := "file://" + dir
	db, s := newGenericStore(t, root, "stray")
	appendRows(t, s, row("a", 1))
	key, _ := lastWAL(t, db, s)
	pos, ok := parseWALKey(walPrefix(s.target, db.Shard()), key)
	require.True(t, ok)
	stray := walKey(s.target, db.Shard(), pos+1)
	f, err := os.Create(filepath.Join(dir, filepath.FromSlash(stray)))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(16<<30)) // sparse: no disk, all of it read only if asked for
	require.NoError(t, f.Close())

	// The live writer's next position is the stray's: its put finds it taken, and it reads no
	// more than its own object's bytes to learn the object is not its own.
	require.ErrorIs(t, errOf(s.Append(ctx, []Row{row("b", 2)})), ErrCorrupt, "fenced, the append claims the shard again and meets the stray")

	owner := openTestDB(t, root, "w1")
	so := openGeneric(t, owner, "stray")
	_, err = so.Append(ctx, []Row{row("b", 2)})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, stray)
	require.Equal(t, 1.0, testutil.ToFloat64(owner.metrics.CorruptObjects.WithLabelValues(string(KindGeneric))))

	call(so.Quarantine(ctx, stray, "16 GiB put there by a tool")).must(t)
	appendRows(t, so, row("b", 2))
	require.Equal(t, map[string]int64{"a": 1, "b": 2}, allRows(t, so, SourceAll))
	require.ErrorIs(t, errOf(so.Release(ctx, stray)), ErrCorrupt)
}

// The WAL committer wrote everything queued as one object, which held as many appends as the
// append budget let in at once, plus tombstones. Now a group commit is split at MemtableBytes
// of rows, each append whole: two queued appends that together exceed it are two objects.
func TestFindingWALGroupCommitIsSplitAtTheMemtableBound(t *testing.T) {
	ctx := context.Background()
	const memtable = 4 << 10
	db := openTestDB(t, newMemURL(), "w1", func(o *Options) { o.MemtableBytes = memtable })
	inner := db.bucket
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	written := map[string][]byte{} // every WAL object put, as it landed (seals delete them)
	db.bucket = inner.WithFaults(objstore.FaultFuncs{
		BeforeFunc: func(op, key string) error {
			if op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") && hold.CompareAndSwap(true, false) {
				close(entered)
				<-release
			}
			return nil
		},
		AfterFunc: func(op, key string, err error) error {
			if op == objstore.OpPutIfAbsent && strings.Contains(key, "/wal/") && err == nil {
				data, gerr := inner.Get(ctx, key)
				mu.Lock()
				written[key] = data
				mu.Unlock()
				return gerr
			}
			return err
		},
	})
	s := createGeneric(t, db, "split", false)
	appendRows(t, s, row("first", 0)) // claims the shard
	big := func(id string) Row { return keyRow(id, int64(1), strings.Repeat("x", 2500)) }
	one := rowcodec.DecodedRowsBytes([]Row{big("a")})
	require.Greater(t, 2*one, int64(memtable), "two appends exceed a WAL object's rows")
	require.LessOrEqual(t, 3*one, db.appends.Limit(), "three appends are let in at once")

	// The committer is held in the put of a's object while b and c queue behind it.
	hold.Store(true)
	results, errs := make([]AppendResult, 3), make([]error, 3)
	var wg sync.WaitGroup
	appendAt := func(i int, id string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.Append(ctx, []Row{big(id)})
		}()
	}
	appendAt(0, "a")
	<-entered
	w := call(s.writer(ctx)).must(t)
	appendAt(1, "b")
	appendAt(2, "c")
	waitFor(t, "b and c to queue", func() bool { return len(w.reqs) >= 2 })
	close(release)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "append %d", i)
	}

	require.NotEqual(t, results[1].WALPosition, results[2].WALPosition, "b and c, queued together, share a WAL object")
	for key, data := range written {
		require.LessOrEqual(t, int64(len(data)), db.walReadLimit(), key)
		ipc := call(unframeWAL(data, key)).must(t)
		recs := call(decodeIPC(memory.DefaultAllocator, ipc, s.codec, key)).must(t)
		var rows []Row
		for _, rec := range recs {
			for i := range int(rec.NumRows()) {
				r := call(s.codec.RowAt(rec, i)).must(t)
				rows = append(rows, r)
			}
		}
		releaseAll(recs)
		require.LessOrEqual(t, rowcodec.DecodedRowsBytes(rows), int64(memtable), "rows of %s", key)
	}
	require.Len(t, allRows(t, s, SourceAll), 4)
}

// walGroups keeps each request whole and in order, cuts before the request that would take a
// group past the limit, and gives a request over the limit alone a group of its own.
func TestWALGroupsCutAtTheLimit(t *testing.T) {
	req := func(key string) *appendReq {
		rows := []Row{{Key: key, Values: []any{key}}}
		return &appendReq{rows: rows, bytes: rowcodec.DecodedRowsBytes(rows)}
	}
	a, b, c, huge, d := req("a"), req("b"), req("c"), req(strings.Repeat("h", 1000)), req("d")
	one := rowcodec.DecodedRowsBytes(a.rows)
	require.Equal(t, [][]*appendReq{{a, b}, {c}, {huge}, {d}}, walGroups([]*appendReq{a, b, c, huge, d}, 2*one))
	require.Equal(t, [][]*appendReq{{a, b, c}}, walGroups([]*appendReq{a, b, c}, 3*one))
	require.Equal(t, [][]*appendReq{{huge}}, walGroups([]*appendReq{huge}, one))
}

// A WAL object's bytes stay within its rows' decoded estimate plus walOverheadBytes, the
// bound both limits rest on, for the widest schema and the rows that encode longest against
// their estimate: tombstones of the longest key with every other field null, and rows of
// every type set.
func TestWALObjectBytesAreBoundedByTheDecodedEstimate(t *testing.T) {
	types := []FieldType{"int64", "float64", "timestamp", "string", "binary", "bool"}
	fields := []Field{{Name: "id", Type: "string"}}
	for i := 1; i < 256; i++ {
		fields = append(fields, Field{Name: fmt.Sprintf("f%0127d", i), Type: types[i%len(types)], Nullable: true})
	}
	db := openTestDB(t, newMemURL(), "w1")
	s := call(db.Create(context.Background(), Target{Kind: KindGeneric, Name: "wide"}, CreateOptions{Schema: &Schema{Fields: fields}})).must(t)
	w := call(s.writer(context.Background())).must(t)

	value := map[FieldType]any{"int64": int64(-1), "float64": 1.5, "timestamp": time.Unix(1, 0).UTC(),
		"string": "", "binary": []byte{}, "bool": true}
	for _, n := range []int{1, 7, 1000} {
		for _, deletes := range []bool{true, false} {
			rows, seqs, deleted := []Row{}, []int64{}, []bool{}
			for i := range n {
				key := fmt.Sprintf("%0*d", MaxKeyBytes, i)
				v := make([]any, len(fields))
				v[0] = key
				for j := 1; j < len(fields) && !deletes; j++ {
					v[j] = value[fields[j].Type]
				}
				rows = append(rows, Row{Key: key, Values: v})
				seqs, deleted = append(seqs, int64(i+1)), append(deleted, deletes)
			}
			data, _, err := w.encodeRows(rows, seqs, deleted)
			require.NoError(t, err)
			got, estimate := int64(len(frameWAL(data))), rowcodec.DecodedRowsBytes(rows)
			t.Logf("%d rows, tombstones %v: %d bytes, estimate %d", n, deletes, got, estimate)
			require.LessOrEqual(t, got, estimate+walOverheadBytes, "%d rows, tombstones %v", n, deletes)
		}
	}
}

// The WAL committer writes no object its readers would refuse: a group commit that encodes
// past the read limit is refused ErrAppendTooLarge and written nowhere, and the next one that
// fits takes the position.
func TestFindingWALCommitterWritesNoObjectOverTheReadLimit(t *testing.T) {
	ctx := context.Background()
	const limit = 4 << 10
	url := newMemURL()
	db, s := newGenericStore(t, url, "guard", func(o *Options) { o.maxWALBytes = limit })
	appendRows(t, s, row("a", 1))
	before, _ := lastWAL(t, db, s)

	require.ErrorIs(t, errOf(s.Append(ctx, []Row{{Key: "big", Values: []any{"big", int64(2), strings.Repeat("x", limit)}}})), ErrAppendTooLarge)
	after, _ := lastWAL(t, db, s)
	require.Equal(t, before, after, "a WAL object over the read limit was written")

	appendRows(t, s, row("b", 3))
	_, data := lastWAL(t, db, s)
	require.LessOrEqual(t, len(data), limit)
	owner := openGeneric(t, openTestDB(t, url, "w1", func(o *Options) { o.maxWALBytes = limit }), "guard")
	appendRows(t, owner, row("c", 4)) // claims the shard, replaying every object under the limit
	require.Equal(t, map[string]int64{"a": 1, "b": 3, "c": 4}, allRows(t, owner, SourceAll))
}
