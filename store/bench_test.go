package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks run on file:// under the test's temp dir: the same disk for the store and
// for the raw-I/O baselines they are compared with.

func benchDB(b *testing.B, tweak ...func(*Options)) (*DB, string) {
	return benchDBAt(b, "", tweak...)
}

// benchDBAt opens url ("" = file:// in a temp dir). A benchmark appends a generation at once:
// the append cap guards clients.
func benchDBAt(b *testing.B, url string, tweak ...func(*Options)) (*DB, string) {
	dir := b.TempDir()
	if url == "" {
		url = "file://" + dir
	}
	return openTestDB(b, url, "bench", append([]func(*Options){func(o *Options) { o.MaxAppendRows = 0 }}, tweak...)...), dir
}

// BenchmarkAppend measures durable one-row appends from many goroutines: group commit
// turns them into far fewer WAL objects. Reports rows/s and rows per WAL object.
func BenchmarkAppend(b *testing.B) {
	for _, par := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", par), func(b *testing.B) {
			db, _ := benchDB(b)
			s := createGeneric(b, db, "append", false)
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(par)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := s.Append(ctx, []Row{row(fmt.Sprintf("k%09d", i), i)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			w := s.residentWriter()
			objects := float64(w.nextPos - 2)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rows/s")
			b.ReportMetric(float64(b.N)/objects, "rows/walobj")
		})
	}
}

// BenchmarkRead measures Get and a 100-row List page as pending generations grow.
func BenchmarkRead(b *testing.B) {
	for _, pending := range []int{0, 16, 256} {
		db, _ := benchDB(b, func(o *Options) { o.PendingMax = 0 })
		s := createGeneric(b, db, "read", false)
		ctx := context.Background()
		const rowsPerGen = 100
		// Base: 10k rows merged; then `pending` generations of 100 rows each on top.
		var base []Row
		for i := 0; i < 10000; i++ {
			base = append(base, row(fmt.Sprintf("k%06d", i), int64(i)))
		}
		seal(b, s, base...)
		if _, err := s.MergeAll(ctx); err != nil {
			b.Fatal(err)
		}
		for g := 0; g < pending; g++ {
			var rows []Row
			for i := 0; i < rowsPerGen; i++ {
				k := (g*rowsPerGen + i*37) % 10000
				rows = append(rows, row(fmt.Sprintf("k%06d", k), int64(g)))
			}
			seal(b, s, rows...)
		}
		// A reader in another process: no memtable, every generation from storage (cached).
		reader, err := OpenDB(ctx, db.bucket.URL(), DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		rs, err := reader.Open(ctx, s.target)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("get/pending=%d", pending), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := rs.Get(ctx, fmt.Sprintf("k%06d", (i*7919)%10000)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("list100/pending=%d", pending), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				page, err := rs.List(ctx, ListOptions{Limit: 100, After: fmt.Sprintf("k%06d", (i*7919)%9000)})
				if err != nil || len(page.Rows) != 100 {
					b.Fatal(err, len(page.Rows))
				}
			}
		})
		_ = reader.Close(ctx)
	}
}

// BenchmarkPrepare measures merge preparation throughput (MB of generation bytes on disk
// per second) next to the raw cost of reading those same files and durably writing the same
// number of bytes to the same disk (fsync of the file and its directory, as Prepare's staged
// write on file:// does), in the same run.
func BenchmarkPrepare(b *testing.B) {
	const gens, rowsPerGen = 8, 20000
	payload := strings.Repeat("p", 200)
	db, dir := benchDB(b, func(o *Options) { o.MergeMaxGenerations = 0; o.MergeMaxBytes = 0 })
	s := createGeneric(b, db, "prep", false)
	for g := 0; g < gens; g++ {
		var rows []Row
		for i := 0; i < rowsPerGen; i++ {
			rows = append(rows, keyRow(fmt.Sprintf("k%08d", (i*gens+g)*7919%(gens*rowsPerGen)), int64(i), payload))
		}
		seal(b, s, rows...)
	}
	var onDisk int64
	var files []string
	_ = filepath.Walk(filepath.Join(dir, "generic", "prep", "_mem_wal"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.Contains(p, string(filepath.Separator)+"gen"+string(filepath.Separator)) {
			onDisk += info.Size()
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	b.Run("prepare", func(b *testing.B) { benchPrepares(b, db, s, onDisk) })
	b.Run("raw-read-write-fsync", func(b *testing.B) {
		b.SetBytes(onDisk)
		out := filepath.Join(dir, "raw.out")
		for i := 0; i < b.N; i++ {
			var all []byte
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					b.Fatal(err)
				}
				all = append(all, data...)
			}
			// Durable like Prepare's staged write on file://: fsync the file, then its
			// directory.
			if err := writeFileSynced(out, all); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPrepareRuns is BenchmarkPrepare in the shape of walkeeper-bench merge-throughput's
// 200 B-row case: generations of consecutive keys that do not overlap (a writer of
// time-ordered keys), 200 B random (incompressible) payloads, 8 × ~4 MiB. Its picks come in
// long runs, so it measures the Parquet encoder and the staged write rather than the copy.
func BenchmarkPrepareRuns(b *testing.B) {
	const gens, rowsPerGen, payloadBytes = 8, 1024 * 4096 / 264, 200
	schema := Schema{Fields: []Field{
		{Name: "id", Type: TypeString},
		{Name: "n", Type: TypeInt64, Nullable: true},
		{Name: "payload", Type: TypeBinary, Nullable: true},
	}}
	db, _ := benchDB(b, func(o *Options) { o.MergeMaxGenerations = 0; o.MergeMaxBytes = 0 })
	f := false
	s, err := db.Create(context.Background(), Target{Kind: KindGeneric, Name: "runs"}, CreateOptions{Schema: &schema, SealOnAppend: &f})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for g := 0; g < gens; g++ {
		rows := make([]Row, rowsPerGen)
		for i := range rows {
			n := int64(g*rowsPerGen + i)
			payload := make([]byte, payloadBytes)
			for j := range payload {
				payload[j] = byte(rng.Uint32())
			}
			rows[i] = keyRow(fmt.Sprintf("k%09d", n), n, payload)
		}
		seal(b, s, rows...)
	}
	sm, err := s.loadShard(ctx, db.shard)
	if err != nil || sm == nil {
		b.Fatal(err)
	}
	var onDisk int64
	for _, gm := range sm.Flushed {
		onDisk += gm.Bytes
	}
	b.ResetTimer()
	benchPrepares(b, db, s, onDisk)
}

// benchPrepares times b.N Prepares of s's pending generations (onDisk bytes) from a cold
// cache, reporting the staged run's bytes over the input's as out/in; each staged run is
// deleted outside the timer.
func benchPrepares(b *testing.B, db *DB, s *Store, onDisk int64) {
	ctx := context.Background()
	b.SetBytes(onDisk)
	for i := 0; i < b.N; i++ {
		db.cache.clear()
		p, err := s.Prepare(ctx, PrepareParams{AttemptKey: fmt.Sprintf("bench/%d", i)})
		if err != nil || p == nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(p.Staged[0].Bytes)/float64(onDisk), "out/in")
		_ = db.bucket.Delete(ctx, p.Staged[0].Path)
		b.StartTimer()
	}
}

// writeFileSynced writes data to path and fsyncs the file and its directory.
func writeFileSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// BenchmarkCommitLockHold reports how long a merge commit holds the store's merge lock for a small
// and a large merge: it must not grow with merge size (only the in-memory swap happens under it).
func BenchmarkCommitLockHold(b *testing.B) {
	for _, backend := range []string{"file", "mem"} {
		for _, size := range []struct {
			name  string
			bytes int
		}{{"64KiB", 64 << 10}, {"64MiB", 64 << 20}} {
			b.Run(backend+"/"+size.name, func(b *testing.B) {
				url := ""
				if backend == "mem" {
					url = fmt.Sprintf("mem://bench-lock-%s-%d", size.name, testURLSeq.Add(1))
				}
				db, _ := benchDBAt(b, url, func(o *Options) {
					o.MergeMaxGenerations, o.MergeMaxBytes = 0, 0
					o.MemtableBytes = 2 * int64(size.bytes) // the merge's rows are one append
				})
				s := createGeneric(b, db, "lock", false)
				ctx := context.Background()
				payload := strings.Repeat("x", 4096)
				rowsPerMerge := max(size.bytes/4200, 1)
				var holds []time.Duration
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					var rows []Row
					for r := 0; r < rowsPerMerge; r++ {
						rows = append(rows, keyRow(fmt.Sprintf("i%06d-r%06d", i, r), int64(r), payload))
					}
					seal(b, s, rows...)
					p, err := s.Prepare(ctx, PrepareParams{})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					res, err := s.CommitRound(ctx, []*PreparedMerge{p})
					if err != nil {
						b.Fatal(err)
					}
					holds = append(holds, res.LockHold)
				}
				b.StopTimer()
				sort.Slice(holds, func(i, j int) bool { return holds[i] < holds[j] })
				b.ReportMetric(float64(holds[len(holds)/2].Microseconds()), "lock-p50-us")
				b.ReportMetric(float64(holds[(len(holds)*99)/100].Microseconds()), "lock-p99-us")
			})
		}
	}
}
