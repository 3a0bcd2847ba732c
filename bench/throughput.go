package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/walkeeper/walkeeper/store"
)

// mergeThroughput is the merge-throughput scenario (docs/benchmarks/merge-throughput.md): MB of
// generations merged per second next to reading the same files and writing and fsyncing as many
// bytes.
func mergeThroughput(ctx context.Context, o Options, res *Result, dir string) error {
	gens, rowsPerGen, payload := 8, fullOrQuick(o, 1024, 256), 4<<10 // 8 × ~4 MiB (quick: ~1 MiB)
	res.params("generations", gens, "generation_size", fmt.Sprintf("%.1f MiB", mib(int64(rowsPerGen*(payload+64)))),
		"row_shapes", "4 KiB binary payload; 200 B binary payload (same bytes, 16× the rows)", "storage", "file:// with fsync")

	type variant struct {
		name, suffix        string
		rowsPerGen, payload int
	}
	variants := []variant{
		{"4 KiB rows", "", rowsPerGen, payload},
		{"200 B rows", "_small", rowsPerGen * 4096 / 264, 200},
	}
	t := Table{Title: "Throughput (MB of generation files per second), median over repetitions, range in brackets",
		Header: []string{"rows", "merge (prepare + commit)", "prepare only", "raw read + write + fsync", "merge / raw"}}
	for _, v := range variants {
		rowsPerGen, payload := v.rowsPerGen, v.payload
		var mergeMBs, rawMBs, ratios, prepMBs []float64
		for rep := 0; rep < o.reps(); rep++ {
			root := filepath.Join(dir, fmt.Sprintf("%s-rep%d", v.suffix, rep))
			url := fileURL(root, false)
			shard, err := writeStore(ctx, o, url, "writer", "tp", gens, rowsPerGen, payload, 1<<30, 0)
			if err != nil {
				return err
			}
			var files []string
			var onDisk int64
			_ = filepath.Walk(filepath.Join(root, "generic", "tp", "_mem_wal"), func(p string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() && strings.Contains(p, string(filepath.Separator)+"gen"+string(filepath.Separator)) && strings.HasSuffix(p, ".arrow") {
					onDisk += info.Size()
					files = append(files, p)
				}
				return nil
			})
			if len(files) != gens {
				return fmt.Errorf("found %d generation files, want %d", len(files), gens)
			}
			// The raw bound reads copies (same bytes, same disk): the merge deletes the originals.
			for i, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				c := filepath.Join(root, fmt.Sprintf("raw-src-%d", i))
				if err := os.WriteFile(c, b, 0o644); err != nil {
					return err
				}
				files[i] = c
			}
			raw := func() (time.Duration, error) {
				t0 := time.Now()
				var all []byte
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err != nil {
						return 0, err
					}
					all = append(all, b...)
				}
				out := filepath.Join(root, fmt.Sprintf("raw-%d.out", rep))
				f, err := os.Create(out)
				if err != nil {
					return 0, err
				}
				_, err = f.Write(all)
				if err == nil {
					err = f.Sync()
				}
				if err = errors.Join(err, f.Close()); err != nil {
					return 0, err
				}
				return time.Since(t0), os.Remove(out)
			}
			merge := func() (time.Duration, time.Duration, error) {
				m, ms, err := openAs(ctx, url, "merger", o.logger(), genericTarget("tp"), noMergeCaps)
				if err != nil {
					return 0, 0, err
				}
				defer m.Close(context.WithoutCancel(ctx))
				t0 := time.Now()
				p, err := ms.Prepare(ctx, store.PrepareParams{Shard: shard})
				if err != nil || p == nil {
					return 0, 0, fmt.Errorf("prepare: %v", err)
				}
				prep := time.Since(t0)
				cr, err := ms.CommitRound(ctx, []*store.PreparedMerge{p})
				if err != nil {
					return 0, 0, err
				}
				if got := cr.Shards[0].Reclaimed; got != gens {
					return 0, 0, fmt.Errorf("reclaimed %d of %d", got, gens)
				}
				return time.Since(t0), prep, nil
			}
			var rd, md, pd time.Duration
			for _, side := range inTurn(rep, func() (err error) { rd, err = raw(); return err }, func() (err error) { md, pd, err = merge(); return err }) {
				if err := side(); err != nil {
					return err
				}
			}
			mb := float64(onDisk) / 1e6
			mergeMBs = append(mergeMBs, mb/md.Seconds())
			prepMBs = append(prepMBs, mb/pd.Seconds())
			rawMBs = append(rawMBs, mb/rd.Seconds())
			ratios = append(ratios, rd.Seconds()/md.Seconds())
			o.progressf("merge-throughput: %s rep %d/%d: %.1f MB merged in %s (%.0f MB/s), raw %s (%.0f MB/s)", v.name, rep+1, o.reps(), mb, fmtDur(md), mb/md.Seconds(), fmtDur(rd), mb/rd.Seconds())
			_ = os.RemoveAll(root)
		}
		m, p, r, q := spreadOf(mergeMBs), spreadOf(prepMBs), spreadOf(rawMBs), spreadOf(ratios)
		t.Rows = append(t.Rows, []string{v.name, m.fmt("%.0f"), p.fmt("%.0f"), r.fmt("%.0f"), q.fmt("%.2f")})
		res.target("merge throughput / raw I/O, "+v.name, "≥ 0.50", q.fmt("%.2f"), q.Median >= 0.5)
		res.values("%s"+v.suffix, map[string]float64{"ratio": q.Median, "ratio_best": q.Max, "merge_mb_s": m.Median, "raw_mb_s": r.Median})
	}
	res.Tables = append(res.Tables, t)
	return nil
}
