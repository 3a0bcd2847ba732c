package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Fuzz targets for the decoders of stored data objects, because storage is not trusted: a generation (Arrow IPC
// file) or a base run (Parquet) with any bytes in it must decode to records that every
// consumer can read, or fail with ErrCorrupt — never a panic, never another error class.
// A record the decoder accepts is then read value by value (the IPC reader is zero-copy, so
// a bad offset would only show when a value is touched), and put in place of a real object of
// a store whose Get, List, Prepare+Commit and CompactBase must fail only with a known error
// class. Run one for a minute with
//
//	go test -run '^$' -fuzz '^FuzzDecodeGeneration$' -fuzztime 1m -fuzzminimizetime 0s ./store/
//	go test -run '^$' -fuzz '^FuzzDecodeRun$' -fuzztime 1m -fuzzminimizetime 0s ./store/
//
// under `ulimit -v 8000000`, so that a decoder regressing to a huge allocation fails instead
// of taking the machine's memory. (-fuzzminimizetime 0s: by default every new interesting
// input is minimized for up to a minute, which on these slow targets takes the whole run.)
// Knobs: WALKEEPER_FUZZ_DECODE_ONLY=1 skips the store part, WALKEEPER_FUZZ_SLOW_DIR=<dir>
// keeps inputs slower than 3 s with their goroutine stacks.
//
// Seeds live in testdata/fuzz/<Name>/ (valid objects of the fuzz schema, truncations, bare
// magic numbers, inputs the runs found, the fixed crashers of findings 9 and 10);
// docs/benchmarks/reliability-runs.md records the runs. A crasher not fixed yet is kept
// outside the corpus, which every go test replays.

// decodeFuzzSchema has every field type, nullable and not.
var decodeFuzzSchema = Schema{Fields: []Field{
	{Name: "id", Type: TypeString},
	{Name: "n", Type: TypeInt64, Nullable: true},
	{Name: "f", Type: TypeFloat64, Nullable: true},
	{Name: "ok", Type: TypeBool, Nullable: true},
	{Name: "bin", Type: TypeBinary, Nullable: true},
	{Name: "at", Type: TypeTimestamp, Nullable: true},
	{Name: "s", Type: TypeString},
}}

const decodeFuzzRows = `[
 {"id":"a","n":1,"f":1.5,"ok":true,"bin":"AAEC","at":"2024-01-02T03:04:05.000006Z","s":"x"},
 {"id":"b","n":null,"f":null,"ok":null,"bin":null,"at":null,"s":""},
 {"id":"c","n":-9223372036854775808,"f":-0.0,"ok":false,"bin":"","at":"1970-01-01T00:00:00Z","s":"ünïcødé"},
 {"id":"d","n":9223372036854775807,"f":1e308,"ok":true,"bin":"/w==","at":"2262-04-11T23:47:16Z","s":"yy"}
]`

// decodeFuzzStore creates a store of decodeFuzzSchema on a fresh mem:// bucket (dropped when
// the test ends) with rows appended and sealed: one pending generation; with merged, also
// two base runs.
func decodeFuzzStore(t *testing.T, merged bool) (*DB, *Store) {
	t.Helper()
	db, s := fuzzStore(t, "decode-fuzz", decodeFuzzSchema)
	rows := call(s.Codec().DecodeJSON([]byte(decodeFuzzRows), 0)).must(t)
	rounds := 1
	if merged {
		rounds = 2
	}
	for range rounds {
		seal(t, s, rows...)
		if merged {
			call(s.MergeAll(context.Background())).must(t)
		}
	}
	return db, s
}

// decodeFuzzSeeds returns a valid generation and a valid run of decodeFuzzSchema as the
// current encoder writes them.
func decodeFuzzSeeds(t *testing.T) (gen, run []byte) {
	t.Helper()
	ctx := context.Background()
	db, s := decodeFuzzStore(t, false)
	sm := call(s.loadShard(ctx, db.Shard())).must(t)
	require.Len(t, sm.Flushed, 1, "seed generation")
	gen = getObject(t, db.bucket, sm.Flushed[0].Path)
	call(s.MergeAll(ctx)).must(t)
	base := call(s.loadBase(ctx)).must(t)
	require.Len(t, base.Runs, 1, "seed run")
	run = getObject(t, db.bucket, base.Runs[0].Path)
	return gen, run
}

// strictDecode (WALKEEPER_FUZZ_STRICT=1) also fails on a runtime panic that the decoders
// recovered into ErrCorrupt: not a bug of the store (the property holds), but an input on
// which the Arrow or Parquet reader indexes out of bounds, worth knowing about.
var strictDecode = os.Getenv("WALKEEPER_FUZZ_STRICT") == "1"

func checkDecodeErr(t *testing.T, what string, err error) {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt, "%s: error of no known class", what)
	if strictDecode {
		require.NotContains(t, err.Error(), "runtime error", "%s: recovered runtime panic", what)
	}
}

// decodeOnly (WALKEEPER_FUZZ_DECODE_ONLY=1) skips the store part of each input: mutations of
// the valid seeds mostly decode, and the store part costs ~100× the decode, so this mode
// explores the decoders' input space much faster.
var decodeOnly = os.Getenv("WALKEEPER_FUZZ_DECODE_ONLY") == "1"

// slowDir (WALKEEPER_FUZZ_SLOW_DIR) receives every input that runs longer than slowAfter,
// with the goroutine stacks at that moment: the fuzzer has no hang detection of its own.
var slowDir = os.Getenv("WALKEEPER_FUZZ_SLOW_DIR")

const slowAfter = 3 * time.Second

func watchSlow(name string, data []byte) (stop func()) {
	if slowDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
			return
		case <-time.After(slowAfter):
		}
		base := filepath.Join(slowDir, fmt.Sprintf("%s-%d-%d", name, os.Getpid(), time.Now().UnixNano()))
		_ = os.WriteFile(base+".input", []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))), 0o644)
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
		_ = os.WriteFile(base+".stacks", buf.Bytes(), 0o644)
	}()
	return func() { close(done) }
}

// knownClass reports whether err is one the store may return over damaged data.
func knownClass(err error) bool {
	return err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidInput) ||
		errors.Is(err, ErrTooManyPending) || errors.Is(err, ErrStalePreparation) || errors.Is(err, ErrConflict)
}

// checkKnown fails the test if err, what a consumer of a fuzzed object returned, is of no
// known class: errors are fine, panics and unclassified failures are not.
func checkKnown(t *testing.T, what string, err error) {
	t.Helper()
	require.True(t, knownClass(err), "%s: error of no known class: %v", what, err)
}

// touchRecord reads every value of an accepted record the ways the store does: the typed
// view (keys, sequences, shards, tombstones), RowAt (WAL replay) and RowJSON (reads).
func touchRecord(t *testing.T, c *rowcodec.Codec, rec arrow.RecordBatch) {
	t.Helper()
	view, err := c.View(rec)
	if err != nil {
		require.ErrorIs(t, err, ErrCorrupt, "View: error of no known class")
		return
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		_ = view.Key(i)
		_ = view.Seq(i)
		_ = view.Shard(i)
		_ = view.Deleted(i)
		if _, err := c.RowAt(rec, i); err != nil {
			require.ErrorIs(t, err, ErrCorrupt, "RowAt %d: error of no known class", i)
		}
		require.NoError(t, errOf(json.Marshal(c.RowJSON(rec, i))), "RowJSON %d does not marshal", i)
	}
}

// decodeFuzzCodec returns c, or the codec of decodeFuzzSchema on the first call.
func decodeFuzzCodec(t *testing.T, c *rowcodec.Codec) *rowcodec.Codec {
	if c != nil {
		return c
	}
	c, err := rowcodec.NewCodec(KindGeneric, decodeFuzzSchema)
	require.NoError(t, err)
	return c
}

func FuzzDecodeGeneration(f *testing.F) {
	var codec *rowcodec.Codec
	f.Add([]byte{})
	f.Add([]byte("ARROW1"))
	f.Add([]byte("ARROW1\x00\x00ARROW1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		codec = decodeFuzzCodec(t, codec)
		defer watchSlow("FuzzDecodeGeneration", data)()
		in := append([]byte(nil), data...) // the zero-copy reader aliases its input
		recs, err := decodeIPC(memory.DefaultAllocator, in, codec, "generation fuzz")
		if err != nil {
			checkDecodeErr(t, "decodeIPC", err)
			return
		}
		for _, rec := range recs {
			touchRecord(t, codec, rec)
		}
		releaseAll(recs)
		if decodeOnly {
			return
		}

		// The accepted bytes as the pending generation of a real store.
		ctx := context.Background()
		db, s := decodeFuzzStore(t, false)
		sm := call(s.loadShard(ctx, db.Shard())).must(t)
		require.Len(t, sm.Flushed, 1)
		require.NoError(t, db.bucket.Put(ctx, sm.Flushed[0].Path, append([]byte(nil), data...)))
		// Re-list it with the fuzzed bytes' checksum and a size that admits them, so the
		// decoder (not the checksum or the size limit, which would refuse any change) is what
		// the store's reads and merge exercise.
		_, err = s.editShard(ctx, db.Shard(), func(m *manifest.Shard) (bool, error) {
			m.Flushed[0].Checksum = checksumOf(data)
			m.Flushed[0].Bytes = max(m.Flushed[0].Bytes, int64(len(data)))
			return true, nil
		})
		require.NoError(t, err)
		exerciseDecoded(t, s)
	})
}

func FuzzDecodeRun(f *testing.F) {
	var codec *rowcodec.Codec
	f.Add([]byte{})
	f.Add([]byte("PAR1"))
	f.Add([]byte("PAR1\x00\x00\x00\x00PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		codec = decodeFuzzCodec(t, codec)
		defer watchSlow("FuzzDecodeRun", data)()
		ctx := context.Background()
		in := append([]byte(nil), data...)
		f, err := decodeParquet(ctx, in, codec, "run fuzz")
		if err != nil {
			checkDecodeErr(t, "decodeParquet", err)
			return
		}
		touchRecord(t, codec, f.rec)
		f.rec.Release()
		if decodeOnly {
			return
		}

		// The accepted bytes as one of two base runs of a real store.
		db, s := decodeFuzzStore(t, true)
		base := call(s.loadBase(ctx)).must(t)
		require.Len(t, base.Runs, 2)
		require.NoError(t, db.bucket.Put(ctx, base.Runs[0].Path, append([]byte(nil), data...)))
		next := base.Next("fuzz") // re-listed with the fuzzed bytes' checksum, as above
		next.Runs[0].Checksum = checksumOf(data)
		next.Runs[0].Bytes = int64(len(data))
		require.NoError(t, s.publishBase(ctx, next))
		exerciseDecoded(t, s)
	})
}

// exerciseDecoded reads and merges a store whose generation or run holds fuzzed bytes that
// decode: errors of a known class are fine, panics and unknown errors are not.
func exerciseDecoded(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d", "zz"} {
		checkKnown(t, "get "+k, errOf(s.Get(ctx, k)))
	}
	page, err := s.List(ctx, ListOptions{Limit: 100})
	checkKnown(t, "list", err)
	if err == nil {
		for _, r := range page.Rows {
			require.NoError(t, errOf(json.Marshal(r)), "listed row does not marshal")
		}
	}
	checkKnown(t, "stats", errOf(s.Stats(ctx)))
	p, err := s.Prepare(ctx, PrepareParams{Shard: s.db.Shard(), AttemptKey: "fuzz"})
	checkKnown(t, "prepare", err)
	if err == nil && p != nil {
		checkKnown(t, "commit", errOf(commitOne(ctx, s, p)))
	}
	res, err := s.CompactBase(ctx, CompactParams{MaxRuns: -1})
	checkKnown(t, "compact", err)
	if err == nil && res.Committed {
		// What compaction wrote from the accepted input must read back.
		checkKnown(t, "list after compaction", errOf(s.List(ctx, ListOptions{Limit: 100, Source: SourceBase})))
	}
}
