package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Benchmarks of the shard manifest's costs on the write path of a table with many writers
// (docs/benchmarks/incident.md, "200 shards again"): every seal and every WAL group
// commit's fencing check reads the shard's latest manifest, which lists every pending
// generation. mem:// without latency, so what is left is the CPU per operation.

// manifestBenchStore is a generic store on mem:// whose shard lists pending generations,
// and a second handle (another process's DB on the same bucket) that drains it, as a
// merge's CommitRound on another node does.
func manifestBenchStore(b *testing.B, pending int) (w, other *Store) {
	b.Helper()
	url := fmt.Sprintf("mem://bench-manifest-%d", testURLSeq.Add(1))
	db, _ := benchDBAt(b, url)
	w = createGeneric(b, db, "hot", false)
	for i := range pending {
		seal(b, w, row(fmt.Sprintf("k%06d", i), int64(i)))
	}
	db2, _ := benchDBAt(b, url, func(o *Options) { o.InstanceID = "bench-merger" })
	return w, openGeneric(b, db2, "hot")
}

// BenchmarkSealWithPending is one append and one seal of a shard that keeps about pending
// generations listed: every 16 seals the other handle drains the 16 oldest (outside the
// timer), so the writer also reads a version it did not publish, as after a round commit.
func BenchmarkSealWithPending(b *testing.B) {
	for _, pending := range []int{10, 100} {
		b.Run(fmt.Sprintf("pending=%d", pending), func(b *testing.B) {
			w, other := manifestBenchStore(b, pending)
			ctx := context.Background()
			shard := w.db.shard
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := w.Append(ctx, []Row{row(fmt.Sprintf("n%09d", i), int64(i))}); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				if i%16 == 15 {
					b.StopTimer()
					m, err := other.loadShard(ctx, shard)
					if err != nil {
						b.Fatal(err)
					}
					var gens []uint64
					for _, g := range m.Flushed[:16] {
						gens = append(gens, g.Gen)
					}
					if _, err := other.drain(ctx, shard, gens); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkLoadShardManifest is one read of a shard's latest manifest listing pending
// generations: "same" when the version has not changed since this handle's last read (a
// snapshot or fencing check between two seals), "new" when another handle published every
// version (each read decodes: "decode" is that decode alone).
func BenchmarkLoadShardManifest(b *testing.B) {
	for _, pending := range []int{10, 100} {
		w, other := manifestBenchStore(b, pending)
		ctx := context.Background()
		shard := w.db.shard
		b.Run(fmt.Sprintf("pending=%d/same", pending), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := other.loadShard(ctx, shard); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("pending=%d/decode", pending), func(b *testing.B) {
			v, raw, err := w.shardChain(shard).latest(ctx)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeShardManifest(raw, v, w.target, shard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeBaseManifest is the decode of a base version a handle reads for the first
// time (every prepare after a round commit): runs base runs, 200 shard watermarks.
func BenchmarkDecodeBaseManifest(b *testing.B) {
	tgt := Target{Kind: KindGeneric, Name: "hot"}
	for _, runs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("runs=%d", runs), func(b *testing.B) {
			m := &manifest.Base{Version: 7, Watermarks: map[string]uint64{}, Reason: "merge"}
			for i := range runs {
				id := fmt.Sprintf("m-149c897f083bb3287725a484-%08d", i)
				m.Runs = append(m.Runs, manifest.Run{ID: id, Path: dataKey(tgt, id), Rows: 64, Bytes: 9000,
					MinKey: "k000000", MaxKey: "k999999", MinSeq: 1796122116141868182, MaxSeq: 1796122116141869155,
					Checksum: "f040933d", Source: fmt.Sprintf("merge:shard-%03d:%d-%d", i%200, i, i+63)})
			}
			for i := range 200 {
				m.Watermarks[fmt.Sprintf("shard-%03d", i)] = uint64(1000 + i)
			}
			raw, err := json.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := decodeBaseManifest(raw, 7, tgt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
