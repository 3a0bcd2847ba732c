package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Tests of how a merge bounds its memory: streamed staged runs, sized reads, concurrent
// generation reads, the footprint reservation and the per-column codec choice.

// mergeTestStore writes gens generations of rows rows each (payload bytes of random data per
// row) into a fresh file:// store and returns it with its bucket.
func mergeTestStore(t *testing.T, gens, rows, payload int, tweak ...func(*Options)) (*Store, *DB) {
	t.Helper()
	ctx := context.Background()
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w", tweak...)
	s := createGeneric(t, db, "mm", false)
	rng := rand.New(rand.NewPCG(1, 2))
	for g := 0; g < gens; g++ {
		var batch []Row
		for i := 0; i < rows; i++ {
			k := fmt.Sprintf("k%06d", (i*7+g*3)%(rows*2))
			p := make([]byte, payload)
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			batch = append(batch, keyRow(k, int64(g*rows+i), string(p)))
		}
		call(s.Append(ctx, batch)).must(t)
		flush(t, s)
	}
	return s, db
}

func TestPrepareReservesFootprintBeforeReading(t *testing.T) {
	ctx := context.Background()
	budget := NewBudget(0) // unlimited, but it still counts what merges reserve
	s, _ := mergeTestStore(t, 4, 300, 100, func(o *Options) { o.Budget = budget; o.MergeMaxBytes = 0; o.MergeMaxGenerations = 0 })
	sm := call(s.loadShard(ctx, s.db.shard)).must(t)
	var input int64
	for _, g := range sm.Flushed {
		input += g.Bytes
	}
	require.Greater(t, input, int64(0))
	var seen []int64
	p, err := s.Prepare(ctx, PrepareParams{AttemptKey: "fp", Progress: func(done, total int) {
		seen = append(seen, budget.Reserved())
	}})
	require.NoError(t, err)
	require.NotNil(t, p)
	require.Len(t, seen, 4, "progress once per generation")
	for _, r := range seen {
		// Held before any generation is decoded: the whole plan's footprint, output included.
		require.GreaterOrEqual(t, r, mergeFootprint(input))
	}
	require.GreaterOrEqual(t, mergeFootprint(p.Bytes), p.Bytes+int64(mergeOverheadBytes))
	require.Zero(t, budget.Reserved(), "released when prepare returns")
	call(commitOne(ctx, s, p)).must(t)
}

func TestPrepareConcurrentReadsReportFirstFailingGeneration(t *testing.T) {
	ctx := context.Background()
	s, db := mergeTestStore(t, 6, 50, 20, func(o *Options) { o.MergeMaxGenerations = 0 })
	boom := errors.New("injected get failure")
	var gets atomic.Int64
	db.bucket = db.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op != objstore.OpGet || !strings.HasSuffix(key, ".arrow") {
			return nil
		}
		gets.Add(1)
		if g, _, ok := parseGenKey(genPrefix(s.target, db.shard), key); ok && (g == 3 || g == 5) {
			return fmt.Errorf("gen %d: %w", g, boom)
		}
		return nil
	}})
	_, err := s.Prepare(ctx, PrepareParams{AttemptKey: "fail"})
	require.ErrorIs(t, err, boom)
	require.Contains(t, err.Error(), "read generation 3 of shard", "the first failing generation in plan order, as a serial read reports it")
	require.Positive(t, gets.Load())

	// Nothing staged, nothing drained: a retry without the fault merges everything.
	db.bucket = db.bucket.WithFaults(nil)
	p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "ok"})).must(t)
	require.Len(t, p.Generations, 6)
	res := call(commitOne(ctx, s, p)).must(t)
	require.Equal(t, 6, res.Reclaimed)
	require.Equal(t, 6, res.Deleted, "merged generation files deleted (concurrently) after the drain")
	require.Empty(t, listKeys(t, db.bucket, genPrefix(s.target, db.shard)))
}

func TestParquetCodecPerColumn(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.BinaryTypes.String},
		{Name: "text", Type: arrow.BinaryTypes.String},
		{Name: "blob", Type: arrow.BinaryTypes.Binary},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("k%08d", i))
		b.Field(1).(*array.StringBuilder).Append(strings.Repeat("compressible ", 20))
		p := make([]byte, 200)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		b.Field(2).(*array.BinaryBuilder).Append(p)
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	pf, _ := openEncoded(t, schema, rec)
	md := pf.MetaData().RowGroup(0)
	codec := func(i int) compress.Compression {
		cc := call(md.ColumnChunk(i)).must(t)
		return cc.Compression()
	}
	require.Equal(t, compress.Codecs.Snappy, codec(0))
	require.Equal(t, compress.Codecs.Snappy, codec(1))
	require.Equal(t, compress.Codecs.Uncompressed, codec(2), "random payloads are stored uncompressed")
}

func TestWriteParquetChunksRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := call(rowcodec.NewCodec(KindGeneric, testSchema)).must(t)
	schema := c.ArrowSchema()
	var rows []Row
	for i := 0; i < 5000; i++ {
		rows = append(rows, keyRow(fmt.Sprintf("k%06d", i), int64(i), strings.Repeat("x", i%50)))
	}
	// Three chunks of different sizes, as Prepare streams them.
	var chunks []arrow.RecordBatch
	for _, r := range [][2]int{{0, 1024}, {1024, 4000}, {4000, 5000}} {
		part := rows[r[0]:r[1]]
		seqs := make([]int64, len(part))
		for j := range seqs {
			seqs[j] = int64(r[0] + j)
		}
		rec := call(c.Build(memory.DefaultAllocator, part, seqs, "s", nil)).must(t)
		chunks = append(chunks, rec)
	}
	var buf bytes.Buffer
	i := 0
	require.NoError(t, writeParquet(&buf, schema, func() (arrow.RecordBatch, error) {
		if i == len(chunks) {
			return nil, nil
		}
		i++
		return chunks[i-1], nil
	}))
	f := call(decodeParquet(ctx, buf.Bytes(), c, "chunks")).must(t)
	defer f.rec.Release()
	require.EqualValues(t, 5000, f.n)
	for i := 0; i < 5000; i += 499 {
		require.Equal(t, rows[i].Key, f.view.Key(i))
	}
}

// A generation whose string offsets point past the value buffer must be ErrCorrupt at
// decode: the zero-copy reader accepted it and the first Key or Shard read panicked outside
// decodeIPC's recover (found by FuzzDecodeGeneration).
func TestDecodeIPCRejectsOutOfBoundsOffsets(t *testing.T) {
	raw := call(os.ReadFile(filepath.Join("testdata", "issue4", "ipc-offsets-out-of-bounds.txt"))).must(t)
	lines := strings.SplitN(string(raw), "\n", 2)
	require.Len(t, lines, 2)
	body := strings.TrimSpace(lines[1])
	body = strings.TrimSuffix(strings.TrimPrefix(body, "[]byte("), ")")
	data := call(strconv.Unquote(body)).must(t)
	// The schema the input was fuzzed against, so it gets past CheckRecord.
	c := call(rowcodec.NewCodec(KindGeneric, decodeFuzzSchema)).must(t)
	recs, err := decodeIPC(memory.DefaultAllocator, []byte(data), c, "crasher")
	if err == nil {
		defer releaseAll(recs)
		for _, rec := range recs {
			v, verr := c.View(rec)
			require.NoError(t, verr)
			for i := 0; i < int(rec.NumRows()); i++ {
				_, _ = v.Key(i), v.Shard(i) // must not panic
			}
		}
		return
	}
	require.ErrorIs(t, err, ErrCorrupt)
}
