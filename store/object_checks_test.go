package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Every object a reader decodes is checked against its manifest entry before a decoder sees
// it: a missing checksum, a WAL object without its header, an object longer or shorter than
// the entry declares and an out-of-range counter are ErrCorrupt (read_object.go).

// mergedStore is a store with one base run (a, b) and one pending generation (c), on url.
func mergedStore(t *testing.T, url string) (*DB, *Store, *Metrics) {
	t.Helper()
	db, m, _ := foreignDB(t, url, "w1")
	s := createGeneric(t, db, "oc", false)
	seal(t, s, row("a", 1), row("b", 2))
	call(s.MergeAll(context.Background())).must(t)
	seal(t, s, row("c", 3))
	return db, s, m
}

// requireReadsCorrupt checks that a fresh reader's Get of key and List both fail ErrCorrupt,
// with no read budget and with one.
func requireReadsCorrupt(t *testing.T, url, key string) {
	t.Helper()
	ctx := context.Background()
	for _, budget := range []bool{false, true} {
		rb := NewBudget(8 << 20)
		reader := openGeneric(t, openTestDB(t, url, "r", func(o *Options) {
			if budget {
				o.ReadBudget = rb
			}
		}), "oc")
		require.ErrorIs(t, errOf(reader.Get(ctx, key)), ErrCorrupt)
		require.ErrorIs(t, errOf(reader.List(ctx, ListOptions{})), ErrCorrupt)
		require.Zero(t, rb.Reserved(), "a refused read gives back what it reserved")
	}
}

// requireCompactCorrupt merges the pending generation into a second run and checks that a
// compaction of both fails ErrCorrupt on the damaged first one.
func requireCompactCorrupt(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	call(s.MergeAll(ctx)).must(t)
	require.ErrorIs(t, errOf(s.CompactBase(ctx, CompactParams{MaxRuns: -1})), ErrCorrupt)
}

func editBase(t *testing.T, s *Store, edit func(*manifest.Base)) {
	t.Helper()
	ctx := context.Background()
	next := call(s.loadBase(ctx)).must(t).Next("test")
	edit(next)
	require.NoError(t, s.publishBase(ctx, next))
}

func editFlushed(t *testing.T, s *Store, edit func(*manifest.Gen)) {
	t.Helper()
	_, err := s.editShard(context.Background(), s.db.Shard(), func(m *manifest.Shard) (bool, error) {
		edit(&m.Flushed[len(m.Flushed)-1])
		return true, nil
	})
	require.NoError(t, err)
}

func TestMissingChecksumIsCorrupt(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name+"/run", func(t *testing.T) {
			_, s, m := mergedStore(t, url+"-run")
			editBase(t, s, func(b *manifest.Base) { b.Runs[0].Checksum = "" })
			requireReadsCorrupt(t, url+"-run", "a")
			requireCompactCorrupt(t, s)
			require.Positive(t, testutil.ToFloat64(m.CorruptObjects.WithLabelValues(string(KindGeneric))))
		})
		t.Run(name+"/generation", func(t *testing.T) {
			_, s, _ := mergedStore(t, url+"-gen")
			editFlushed(t, s, func(g *manifest.Gen) { g.Checksum = "" })
			requireReadsCorrupt(t, url+"-gen", "c")
			require.ErrorIs(t, errOf(s.Prepare(context.Background(), PrepareParams{AttemptKey: "wf/x"})), ErrCorrupt)
		})
	}
}

func TestWALObjectWithoutHeaderIsCorrupt(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, _, _ := foreignDB(t, url, "w1")
			s := createGeneric(t, db, "oc", false)
			appendRows(t, s, row("a", 1)) // no seal: a kill leaves it in the WAL
			positions := call(db.listWAL(ctx, s.target, db.Shard())).must(t)
			require.NotEmpty(t, positions)
			key := walKey(s.target, db.Shard(), positions[len(positions)-1])
			framed := getObject(t, db.bucket, key)
			require.True(t, bytes.HasPrefix(framed, []byte(walFrameMagic)), "every WAL object walkeeper writes has the header")
			require.NoError(t, db.bucket.Put(ctx, key, framed[walFrameHeader:])) // a bare IPC file

			db2, m2, _ := foreignDB(t, url, "w1")
			require.ErrorIs(t, errOf(db2.Recover(ctx)), ErrCorrupt)
			require.Positive(t, testutil.ToFloat64(m2.CorruptObjects.WithLabelValues(string(KindGeneric))))
		})
	}
}

func TestObjectSizeMustMatchItsManifest(t *testing.T) {
	for name, url := range backends(t) {
		for _, c := range []struct {
			name  string
			bytes func(int64) int64
		}{
			{"understated", func(n int64) int64 { return n / 2 }},
			{"overstated", func(n int64) int64 { return n + 1 }},
			{"zero", func(int64) int64 { return 0 }},
		} {
			t.Run(name+"/run-"+c.name, func(t *testing.T) {
				u := url + "-" + c.name
				_, s, _ := mergedStore(t, u)
				editBase(t, s, func(b *manifest.Base) { b.Runs[0].Bytes = c.bytes(b.Runs[0].Bytes) })
				requireReadsCorrupt(t, u, "a")
				requireCompactCorrupt(t, s)
			})
		}
		t.Run(name+"/generation-understated", func(t *testing.T) {
			u := url + "-gen"
			db, s, _ := mergedStore(t, u)
			// A generation whose file is far larger than its declared record size allows.
			rows := make([]Row, 0, 2000)
			for i := range 2000 {
				rows = append(rows, Row{Key: fmt.Sprintf("k%05d", i), Values: []any{fmt.Sprintf("k%05d", i), int64(i), strings.Repeat("x", 50)}})
			}
			seal(t, s, rows...)
			editFlushed(t, s, func(g *manifest.Gen) { g.Bytes = 1 })
			requireReadsCorrupt(t, u, "k00001")
			require.ErrorIs(t, errOf(openGeneric(t, openTestDB(t, db.bucket.URL(), "w1"), "oc").Prepare(context.Background(), PrepareParams{AttemptKey: "wf/y"})), ErrCorrupt)
		})
	}
}

func TestGenerationFilesFitTheirReadLimit(t *testing.T) {
	// Wide schemas with long names are where the file outgrows its record the most.
	for _, fields := range []int{1, 8, 200} {
		for _, rows := range []int{1, 3, 500} {
			t.Run(fmt.Sprintf("%d-fields-%d-rows", fields, rows), func(t *testing.T) {
				ctx := context.Background()
				sch := Schema{Fields: []Field{{Name: "id", Type: TypeString}}}
				for i := 1; i < fields; i++ {
					typ := []FieldType{TypeInt64, TypeString, TypeBool, TypeFloat64, TypeBinary, TypeTimestamp}[i%6]
					sch.Fields = append(sch.Fields, Field{Name: fmt.Sprintf("f%03d_%s", i, strings.Repeat("n", 100)), Type: typ, Nullable: true})
				}
				db := openTestDB(t, fmt.Sprintf("mem://genlimit-%d", testURLSeq.Add(1)), "w1")
				s := call(db.Create(ctx, Target{Kind: KindGeneric, Name: "wide"}, CreateOptions{Schema: &sch})).must(t)
				batch := make([]Row, rows)
				for r := range batch {
					vals := make([]any, fields)
					vals[0] = fmt.Sprintf("k%04d", r)
					batch[r] = Row{Key: vals[0].(string), Values: vals}
				}
				seal(t, s, batch...)
				g := call(s.loadShard(ctx, db.Shard())).must(t).Flushed[0]
				data := getObject(t, db.bucket, g.Path)
				require.LessOrEqual(t, int64(len(data)), s.genFileLimit(g.Bytes),
					"file %d bytes, record %d bytes", len(data), g.Bytes)
				call(s.Get(ctx, "k0000")).must(t)
			})
		}
	}
}

// A base run whose checksum and size match its entry but whose keys are out of order (a
// writer's bug, not a storage fault) fails the compaction that decodes its batches, and is
// counted as the reads count it.
func TestCompactionCountsARunWithUnsortedKeys(t *testing.T) {
	ctx := context.Background()
	db, s, m := mergedStore(t, "file://"+t.TempDir())
	rec := call(s.codec.Build(nil, []Row{row("b", 2), row("a", 1)}, []int64{2, 1}, db.Shard(), nil)).must(t)
	var run bytes.Buffer
	require.NoError(t, writeParquetRecs(&run, s.codec.ArrowSchema(), rec))
	editBase(t, s, func(b *manifest.Base) {
		require.NoError(t, db.bucket.Put(ctx, b.Runs[0].Path, run.Bytes()))
		b.Runs[0].Checksum, b.Runs[0].Bytes = checksumOf(run.Bytes()), int64(run.Len())
	})
	corrupt := m.CorruptObjects.WithLabelValues(string(KindGeneric))
	require.Zero(t, testutil.ToFloat64(corrupt))
	requireCompactCorrupt(t, s)
	require.Equal(t, 1.0, testutil.ToFloat64(corrupt))
}

// A merge of a generation whose manifest declares a size near the int64 limit leaves its
// budget's accounting as it found it: a read buffer's size class must not wrap negative and
// credit the budget bytes nobody freed, which would let the pool keep buffers without bound.
// Where its file's read limit is past the int64 range, a read of it is ErrCorrupt too: the read
// admission's estimate must not wrap negative and fail the read as the caller's invalid input.
func TestHugeDeclaredGenerationSizeKeepsTheBudgetExact(t *testing.T) {
	for _, declared := range []int64{math.MaxInt64, math.MaxInt64 - 10, 1<<62 + 3<<60 + 1, 1 << 62} {
		t.Run(fmt.Sprint(declared), func(t *testing.T) {
			url := newMemURL()
			_, s, _ := mergedStore(t, url)
			editFlushed(t, s, func(g *manifest.Gen) { g.Bytes = declared })
			budget := NewBudget(64 << 20)
			db2, m2, _ := foreignDB(t, url, "w1")
			db2.opts.Budget = budget
			s2 := openGeneric(t, db2, "oc")
			_, err := s2.Prepare(context.Background(), PrepareParams{AttemptKey: "wf/huge"})
			if declared > math.MaxInt64-(1<<20) {
				// Its file's read limit is past the int64 range.
				require.ErrorIs(t, err, ErrCorrupt)
				require.Positive(t, testutil.ToFloat64(m2.CorruptObjects.WithLabelValues(string(KindGeneric))))
				requireReadsCorrupt(t, url, "c")
			} else {
				// The lone oversized merge reads the small object the entry overstates.
				require.NoError(t, err)
			}
			require.Zero(t, budget.Allocated(), "the merge's account is back at zero")
			require.Zero(t, budget.Reserved())
		})
	}
}

// A read or a compaction of a run whose manifest declares a size near the int64 limit is
// ErrCorrupt, and the compaction gives its budget back: neither the read admission's estimate
// nor the compaction's reservation may wrap negative and fail as invalid input.
func TestHugeDeclaredRunSizeIsCorrupt(t *testing.T) {
	for _, declared := range []int64{math.MaxInt64, math.MaxInt64 - 10, 1<<61 + 1} {
		for _, budgeted := range []bool{false, true} {
			t.Run(fmt.Sprint(declared, "-budget-", budgeted), func(t *testing.T) {
				url := newMemURL()
				db, s, _ := mergedStore(t, url)
				budget := NewBudget(64 << 20)
				if budgeted {
					db.opts.Budget = budget
				}
				editBase(t, s, func(b *manifest.Base) { b.Runs[0].Bytes = declared })
				requireReadsCorrupt(t, url, "a")
				requireCompactCorrupt(t, s)
				require.Zero(t, budget.Allocated())
				require.Zero(t, budget.Reserved())
			})
		}
	}
}
