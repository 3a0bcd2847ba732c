package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// wideSchema is a generic schema of a key and n nullable string columns.
func wideSchema(n int) *Schema {
	s := &Schema{Fields: []Field{{Name: "id", Type: TypeString}}}
	for i := range n {
		s.Fields = append(s.Fields, Field{Name: fmt.Sprintf("c%03d", i), Type: TypeString, Nullable: true})
	}
	return s
}

// idRows is a JSON array of n rows {"id":"r0000000"} ...
func idRows(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"r%07d"}`, i)
	}
	b.WriteByte(']')
	return []byte(b.String())
}

// paddedRows is batch a of 20 rows of about 700 bytes each, keyed by format of a and the row.
func paddedRows(format string, a int) []Row {
	pad := strings.Repeat("p", 500)
	rows := make([]Row, 0, 20)
	for i := range 20 {
		rows = append(rows, keyRow(fmt.Sprintf(format, a, i), int64(i), pad))
	}
	return rows
}

func walRows(t *testing.T, s *Store) int {
	t.Helper()
	return len(call(s.List(context.Background(), ListOptions{Source: SourceWAL, Limit: 10000})).must(t).Rows)
}

// An append over the row cap or the memtable bound is refused whole before its rows are
// decoded: a huge body of tiny rows into a wide schema (one slot per column per row) costs
// a scan, not its decoded size.
func TestAppendTooLargeIsRefusedBeforeDecoding(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, fmt.Sprintf("mem://toolarge-%d", testURLSeq.Add(1)), "w", func(o *Options) {
		o.MaxAppendRows = 1000
		o.MemtableBytes = 1 << 20
	})
	wide, err := db.Create(ctx, Target{Kind: KindGeneric, Name: "wide"}, CreateOptions{Schema: wideSchema(255)})
	require.NoError(t, err)

	narrow := createGeneric(t, db, "narrow", false)
	_, err = narrow.AppendJSON(ctx, idRows(1001))
	require.ErrorIs(t, err, ErrAppendTooLarge)
	require.ErrorIs(t, err, ErrInvalidInput, "a refinement of invalid input")
	require.Contains(t, err.Error(), "more than the limit of 1000 rows")

	// 300 rows of 256 slots each are over 1 MiB decoded, though the body is 5 KiB.
	body := idRows(300)
	require.Less(t, len(body), 6<<10)
	_, err = wide.AppendJSON(ctx, body)
	require.ErrorIs(t, err, ErrAppendTooLarge)
	require.Contains(t, err.Error(), "memtable bound")
	require.Zero(t, walRows(t, wide), "nothing of a refused append is written")

	// The scan stops at the first row over a limit and materialises none: a 200,000-row
	// body allocates a handful of objects, not one per row.
	huge := idRows(200_000)
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := wide.AppendJSON(ctx, huge); !errors.Is(err, ErrAppendTooLarge) {
			t.Fatal(err)
		}
	})
	require.Less(t, allocs, 50.0)

	// Go callers get the same limits.
	rows := make([]Row, 1001)
	for i := range rows {
		rows[i] = row(fmt.Sprintf("r%d", i), int64(i))
	}
	require.ErrorIs(t, errOf(narrow.Append(ctx, rows)), ErrAppendTooLarge)
	rows = rows[:300]
	for i := range rows {
		rows[i] = Row{Key: fmt.Sprintf("r%d", i), Values: make([]any, 256)}
		rows[i].Values[0] = rows[i].Key
	}
	require.ErrorIs(t, errOf(wide.Append(ctx, rows)), ErrAppendTooLarge)
	require.Zero(t, walRows(t, narrow))

	res := call(wide.AppendJSON(ctx, idRows(100))).must(t)
	require.Equal(t, 100, res.Rows)
	require.Equal(t, 100, walRows(t, wide))
	require.Zero(t, db.appends.Reserved(), "an answered append gives its charge back")
}

// The estimate an append is charged is at least what its decoded rows hold, for every type.
func TestAppendChargeCoversDecodedRows(t *testing.T) {
	c, err := rowcodec.NewCodec(KindGeneric, Schema{Fields: []Field{
		{Name: "id", Type: TypeString}, {Name: "s", Type: TypeString, Nullable: true},
		{Name: "i", Type: TypeInt64, Nullable: true}, {Name: "f", Type: TypeFloat64, Nullable: true},
		{Name: "b", Type: TypeBool, Nullable: true}, {Name: "bin", Type: TypeBinary, Nullable: true},
		{Name: "ts", Type: TypeTimestamp, Nullable: true},
	}})
	require.NoError(t, err)
	for _, body := range []string{
		`[{"id":"a"}]`,
		`[{"id":"a","s":"x\u00e9y","i":-12,"f":1.5e3,"b":true,"bin":"aGVsbG8gd29ybGQ=","ts":"2024-01-02T03:04:05.123456789+02:00"}]`,
		`[{"id":"` + strings.Repeat("k", 900) + `","s":"` + strings.Repeat("v", 5000) + `"},{"id":"b","s":null,"i":null},{"id":"c","bin":"` + strings.Repeat("QUJD", 300) + `"}]`,
	} {
		rows := call(c.DecodeJSON([]byte(body), 0)).must(t)
		n, size, err := c.MeasureJSON([]byte(body), func(int, int64) error { return nil })
		require.NoError(t, err)
		require.Equal(t, len(rows), n)
		require.GreaterOrEqual(t, size, rowcodec.DecodedRowsBytes(rows), body[:min(len(body), 60)])
	}
}

// Appends in flight are charged to the DB's append budget: one that does not fit waits
// (and gives up with ErrBudgetBusy, not tested here: it takes appendBudgetWait), and
// proceeds once the room is given back.
func TestAppendWaitsForTheAppendBudget(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, fmt.Sprintf("mem://appendbudget-%d", testURLSeq.Add(1)), "w")
	s := createGeneric(t, db, "budget", false)
	require.Equal(t, appendBudgetFactor*db.opts.MemtableBytes, db.appends.Limit())
	hold, _, err := db.appends.Reserve(ctx, db.appends.Limit())
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := s.AppendJSON(ctx, []byte(`[{"id":"a","n":1}]`))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("append ran while the budget was full: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	hold.Release()
	require.NoError(t, <-done)
	require.Zero(t, db.appends.Reserved())

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	hold, _, err = db.appends.Reserve(ctx, db.appends.Limit())
	require.NoError(t, err)
	require.ErrorIs(t, errOf(s.AppendJSON(short, []byte(`[{"id":"b"}]`))), context.DeadlineExceeded, "the caller's deadline ends the wait")
	hold.Release()
}

// Keys longer than MaxKeyBytes are refused on every path, as ErrKeyTooLong (a refinement of
// ErrInvalidInput); MaxKeyBytes itself is fine.
func TestKeysLongerThanMaxKeyBytesAreRefused(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, fmt.Sprintf("mem://longkey-%d", testURLSeq.Add(1)), "w")
	s := createGeneric(t, db, "keys", false)
	long := strings.Repeat("k", MaxKeyBytes+1)
	ok := strings.Repeat("k", MaxKeyBytes)

	require.ErrorIs(t, errOf(s.Append(ctx, []Row{row(long, 1)})), ErrKeyTooLong)
	_, err := s.AppendJSON(ctx, []byte(`[{"id":"`+long+`"}]`))
	require.ErrorIs(t, err, ErrKeyTooLong)
	require.ErrorIs(t, err, ErrInvalidInput)
	require.ErrorIs(t, errOf(s.Codec().DecodeJSON([]byte(`[{"id":"`+long+`"}]`), 0)), ErrKeyTooLong)
	require.ErrorIs(t, s.Delete(ctx, long), ErrKeyTooLong)
	require.ErrorIs(t, errOf(s.Get(ctx, long)), ErrKeyTooLong)
	require.ErrorIs(t, errOf(s.List(ctx, ListOptions{After: long})), ErrKeyTooLong)
	require.Zero(t, walRows(t, s))

	require.NoError(t, errOf(s.AppendJSON(ctx, []byte(`[{"id":"`+ok+`","n":7}]`))))
	require.Equal(t, int64(7), call(s.Get(ctx, ok)).must(t)["n"])
	call(s.List(ctx, ListOptions{After: ok})).must(t)
	require.NoError(t, s.Delete(ctx, ok))
}

// The active memtable is sealed once it reaches MemtableBytes, without a flush.
func TestMemtableIsSealedAtMemtableBytes(t *testing.T) {
	ctx := context.Background()
	const bound = 64 << 10
	db := openTestDB(t, fmt.Sprintf("mem://memseal-%d", testURLSeq.Add(1)), "w", func(o *Options) { o.MemtableBytes = bound })
	s := createGeneric(t, db, "memseal", false)
	total := 0
	for a := range 20 {
		rows := paddedRows("k%02d-%02d", a)
		appendRows(t, s, rows...)
		total += len(rows)
	}
	// The seal of a full memtable runs off the WAL committer: wait for it.
	waitFor(t, "a memtable past its bound to be sealed", func() bool { return s.OwnPending() > 0 })
	w := s.residentWriter()
	w.mu.Lock()
	active := w.active.bytes
	w.mu.Unlock()
	require.Less(t, active, int64(2*bound))
	require.Len(t, call(s.List(ctx, ListOptions{Limit: 1000})).must(t).Rows, total)
}

// While seals fail and WAL objects are still written, a writer keeps acknowledging rows it
// cannot seal, and holds them in memory: appends are refused (ErrBudgetBusy) once its
// memtables hold unsealedFactor × MemtableBytes, and accepted again once a seal succeeds.
func TestUnsealedRowsAreBoundedWhileSealsFail(t *testing.T) {
	ctx := context.Background()
	const bound = 64 << 10
	var failSeals atomic.Bool
	db := openTestDB(t, fmt.Sprintf("mem://unsealed-%d", testURLSeq.Add(1)), "w", func(o *Options) { o.MemtableBytes = bound })
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if failSeals.Load() && op == objstore.OpPut && strings.Contains(key, "/gen/") {
			return errors.New("injected: generation writes refused")
		}
		return nil
	}})
	s := createGeneric(t, db, "unsealed", false)
	failSeals.Store(true)
	accepted, refused := 0, 0
	for a := 0; a < 200 && refused == 0; a++ {
		_, err := s.Append(ctx, paddedRows("k%03d-%02d", a))
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, ErrBudgetBusy):
			refused++
		default:
			t.Fatalf("append %d: %v", a, err)
		}
	}
	require.Equal(t, 1, refused, "appends are refused before 200 batches of about 14 KiB pile up in memory")
	w := s.residentWriter()
	w.mu.Lock()
	held := w.active.bytes
	for _, mt := range w.frozen {
		held += mt.bytes
	}
	w.mu.Unlock()
	require.Less(t, held, int64(unsealedFactor+1)*bound, "held at most the bound plus one append")
	t.Logf("%d appends accepted, %d bytes held unsealed when refused", accepted, held)

	failSeals.Store(false)
	flush(t, s)
	_, err := s.Append(ctx, paddedRows("k%03d-%02d", 1000))
	require.NoError(t, err, "a seal that succeeds admits appends again")
	page := call(s.List(ctx, ListOptions{Limit: 10000})).must(t)
	require.Len(t, page.Rows, 20*(accepted+1), "every acknowledged row is readable")
}
