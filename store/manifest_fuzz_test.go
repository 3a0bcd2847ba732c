package store

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// Fuzz targets for manifest decoding, because storage is not trusted: a base or shard manifest with any bytes in
// it — truncated, garbled, hostile (paths outside the store, absurd numbers, a million
// generations) — must make loads fail with ErrCorrupt, and reads, stats and merges over it
// fail with an error, never a panic or a hang. Run one for a minute with e.g.
//
//	go test -run '^$' -fuzz '^FuzzBaseManifest$' -fuzztime 1m ./store/
//
// Seeds live in testdata/fuzz/<Name>/; docs/benchmarks/reliability-runs.md records the runs.

var fuzzSeq atomic.Int64

// fuzzStore creates a generic store "fz" of sch for the instance "w1" on a fresh mem:// bucket
// named after prefix, whose objects are dropped when the test ends (so a long fuzz run
// does not keep every bucket alive).
func fuzzStore(t *testing.T, prefix string, sch Schema) (*DB, *Store) {
	t.Helper()
	url := fmt.Sprintf("mem://%s-%d-%d", prefix, os.Getpid(), fuzzSeq.Add(1))
	t.Cleanup(func() { dropMemBucket(url) })
	db := openTestDB(t, url, "w1")
	return db, call(db.Create(context.Background(), Target{Kind: KindGeneric, Name: "fz"}, CreateOptions{Schema: &sch})).must(t)
}

// manifestFuzzStore is a generic store of a key and one number on a fresh bucket.
func manifestFuzzStore(t *testing.T) (*DB, *Store) {
	t.Helper()
	return fuzzStore(t, "manifest-fuzz", Schema{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "n", Type: TypeInt64, Nullable: true}}})
}

// exercise runs every read-side consumer of the manifests; errors are fine, panics are not.
// It reports the errors of no known class (knownClass).
func exercise(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	checkKnown(t, "stats", errOf(s.Stats(ctx)))
	checkKnown(t, "get", errOf(s.Get(ctx, "a")))
	checkKnown(t, "list", errOf(s.List(ctx, ListOptions{Limit: 10})))
	checkKnown(t, "pending", errOf(s.PendingShards(ctx)))
	p, err := s.Prepare(ctx, PrepareParams{Shard: s.db.Shard(), AttemptKey: "fuzz"})
	checkKnown(t, "prepare", err)
	if err == nil && p != nil {
		checkKnown(t, "commit", errOf(commitOne(ctx, s, p)))
	}
	checkKnown(t, "compact", errOf(s.CompactBase(ctx, CompactParams{})))
}

const seedBase = `{"version":1,"runs":[{"id":"m-1","path":"generic/fz/data/m-1.parquet","rows":1,"bytes":10,` +
	`"min_key":"a","max_key":"z","min_seq":1,"max_seq":2,"deletes":0,"source":"merge:s:1-1"}],` +
	`"watermarks":{"s":1},"created_at":"2024-01-01T00:00:00Z","reason":"merge"}`

// FuzzBaseManifest: any bytes as _versions/00000000000000000001.json.
func FuzzBaseManifest(f *testing.F) {
	f.Add([]byte(seedBase))
	f.Add([]byte(`{"version":1,"runs":[],"watermarks":{}}`))
	f.Add([]byte(`{"version":1,"runs":null,"watermarks":null}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"runs":[{"path":"../../etc/passwd"}]}`))
	f.Add([]byte(`{"version":1,"runs":[{"path":"generic/other/data/x.parquet","min_key":"z","max_key":"a"}]}`))
	f.Add([]byte(`{"version":1,"watermarks":{"../x":18446744073709551615}}`))
	f.Add([]byte(`{"version":1,"watermarks":{"s":9223372036854775808}}`))
	f.Add([]byte(seedBase[:len(seedBase)/2]))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		db, s := manifestFuzzStore(t)
		ctx := context.Background()
		require.NoError(t, db.bucket.Put(ctx, versionsPrefix(s.target)+versionName(1), raw))
		m, err := s.loadBase(ctx)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.True(t, m.Version == 1 && m.Watermarks != nil, "loadBase accepted %+v", m)
			for sh, wm := range m.Watermarks {
				require.LessOrEqual(t, wm, uint64(maxCounter), "loadBase accepted the watermark of %q", sh)
			}
			for _, r := range m.Runs {
				require.True(t, r.Bytes >= 0 && r.Rows >= 0, "loadBase accepted run %+v", r)
			}
		}
		exercise(t, s)
	})
}

func seedShard(shard string) string {
	return `{"shard":"` + shard + `","version":1,"writer_epoch":1,"next_generation":3,"flushed":[` +
		`{"gen":1,"path":"generic/fz/_mem_wal/` + shard + `/gen/00000000000000000001-1.arrow","rows":1,"bytes":10,"min_key":"a","max_key":"a","min_seq":1,"max_seq":1,"sealed_at":"2024-01-01T00:00:00Z"},` +
		`{"gen":2,"path":"generic/fz/_mem_wal/` + shard + `/gen/00000000000000000002-1.arrow","rows":1,"bytes":10,"min_key":"b","max_key":"b","min_seq":2,"max_seq":2}],` +
		`"replay_after":0,"max_seq":2,"updated_at":"2024-01-01T00:00:00Z"}`
}

// FuzzShardManifest: any bytes as _mem_wal/<shard>/manifest/00000000000000000001.json, for
// the shard of the process that reads and merges (so Prepare consumes it too).
func FuzzShardManifest(f *testing.F) {
	shard := ShardID("w1")
	f.Add([]byte(seedShard(shard)))
	f.Add([]byte(strings.ReplaceAll(seedShard(shard), `"gen":2`, `"gen":1`)))
	f.Add([]byte(strings.ReplaceAll(seedShard(shard), "generic/fz/_mem_wal", "generic/fz/../x")))
	f.Add([]byte(`{"shard":"` + shard + `","version":1,"flushed":[{"gen":18446744073709551615,"path":""}]}`))
	f.Add([]byte(`{"shard":"` + shard + `","version":1,"replay_after":18446744073709551615}`))
	f.Add([]byte(`{"shard":"other","version":1}`))
	f.Add([]byte(`{"shard":"` + shard + `","version":7}`))
	f.Add([]byte(seedShard(shard)[:100]))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		db, s := manifestFuzzStore(t)
		ctx := context.Background()
		require.NoError(t, db.bucket.Put(ctx, shardManifestPrefix(s.target, shard)+versionName(1), raw))
		m, err := s.loadShard(ctx, shard)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
		} else {
			require.True(t, m != nil && m.Version == 1 && m.Shard == shard, "loadShard accepted %+v", m)
			require.True(t, m.WriterEpoch <= maxCounter && m.NextGeneration <= maxCounter && m.ReplayAfter <= maxCounter,
				"loadShard accepted counters out of range: %+v", m)
			for _, g := range m.Flushed {
				require.True(t, g.Gen <= maxCounter && g.Bytes >= 0 && g.Rows >= 0, "loadShard accepted generation %+v", g)
			}
		}
		exercise(t, s)
	})
}
