package store

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readCorpusBytes reads a one-argument Go fuzz corpus file ([]byte("...")).
func readCorpusBytes(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.SplitN(string(raw), "\n", 3)
	require.GreaterOrEqual(t, len(lines), 2, path)
	lit := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(lines[1]), "[]byte("), ")")
	s, err := strconv.Unquote(lit)
	require.NoError(t, err, path)
	return []byte(s)
}

// A damaged object is refused by its manifest entry (checksum, or the size it declares)
// before any decoder sees it. The replacement bytes are the two inputs the decode fuzzers
// found that made the Arrow library request tens of gigabytes (docs/RELIABILITY.md finding
// 10; the decoders now refuse them too), and a single flipped bit, which could decode into
// plausible wrong rows.
func TestChecksumRefusesDamagedObjectsBeforeDecoding(t *testing.T) {
	ctx := context.Background()
	corpus := filepath.Join("testdata", "fuzz")
	cases := []struct {
		name string
		run  bool
		data func(orig []byte) []byte
	}{
		{"generation, garbled schema (OOM crasher)", false, func([]byte) []byte {
			return readCorpusBytes(t, filepath.Join(corpus, "FuzzDecodeGeneration", "d21c188edece6bb7"))
		}},
		{"run, garbled ARROW:schema (OOM crasher)", true, func([]byte) []byte {
			return readCorpusBytes(t, filepath.Join(corpus, "FuzzDecodeRun", "228c4636c4b9fe79"))
		}},
		{"generation, one bit flipped", false, flipMiddleBit},
		{"run, one bit flipped", true, flipMiddleBit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, s := newGenericStore(t, "file://"+t.TempDir(), "sum")
			seal(t, s, row("a", 1), row("b", 2))
			if tc.run {
				call(s.MergeAll(ctx)).must(t)
			}
			var key, sum string
			if tc.run {
				base := call(s.loadBase(ctx)).must(t)
				require.Len(t, base.Runs, 1)
				key, sum = base.Runs[0].Path, base.Runs[0].Checksum
			} else {
				sm := call(s.loadShard(ctx, db.Shard())).must(t)
				require.Len(t, sm.Flushed, 1)
				key, sum = sm.Flushed[0].Path, sm.Flushed[0].Checksum
			}
			require.Len(t, sum, 8, "manifest entry carries a checksum")
			orig := getObject(t, db.bucket, key)
			require.Equal(t, checksumOf(orig), sum)
			require.NoError(t, db.bucket.Put(ctx, key, tc.data(orig)))
			db.cache.clear()

			_, err := s.Get(ctx, "a")
			require.ErrorIs(t, err, ErrCorrupt)
			require.Regexp(t, "checksum|as its manifest declares", err.Error())
			require.Contains(t, err.Error(), key)
			require.ErrorIs(t, errOf(s.List(ctx, ListOptions{})), ErrCorrupt)
			if !tc.run {
				require.ErrorIs(t, errOf(s.Prepare(ctx, PrepareParams{AttemptKey: "after-damage"})), ErrCorrupt, "a merge never folds a damaged generation into the base")
			}
		})
	}
}

func flipMiddleBit(orig []byte) []byte {
	b := append([]byte(nil), orig...)
	b[len(b)/2] ^= 0x10
	return b
}

// WAL objects carry their checksum in a header: a damaged one, or one without the header
// (plain Arrow IPC, whose checksum nothing can check), is ErrCorrupt for the restarted owner
// before any decoder sees it.
func TestWALChecksum(t *testing.T) {
	ctx := context.Background()
	root := "file://" + t.TempDir()
	db, s := newGenericStore(t, root, "walsum")
	appendRows(t, s, row("a", 1))
	appendRows(t, s, row("b", 2))
	objs, err := db.bucket.List(ctx, walPrefix(s.target, db.Shard()))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(objs), 3, "fence marker and two appends")
	raw := getObject(t, db.bucket, objs[len(objs)-1].Key)
	ipc, err := unframeWAL(raw, "test")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(ipc), "ARROW1"))

	// The newest object in the old, unframed form; the one before damaged in its payload.
	require.NoError(t, db.bucket.Put(ctx, objs[len(objs)-1].Key, ipc))
	prev := getObject(t, db.bucket, objs[len(objs)-2].Key)
	damaged := flipMiddleBit(prev)
	require.NoError(t, db.bucket.Put(ctx, objs[len(objs)-2].Key, damaged))
	// No Close: a graceful close would seal the memtable and make the WAL garbage. The next
	// handle with the same instance is the restarted process.

	s2 := openGeneric(t, openTestDB(t, root, "w1"), "walsum")
	_, err = s2.Append(ctx, []Row{row("c", 3)})
	require.ErrorIs(t, err, ErrCorrupt, "replay must refuse the damaged WAL object")
	require.Contains(t, err.Error(), "checksum")
	require.Contains(t, err.Error(), objs[len(objs)-2].Key)

	// Restored, the unframed object next to it is refused the same way.
	require.NoError(t, db.bucket.Put(ctx, objs[len(objs)-2].Key, prev))
	s3 := openGeneric(t, openTestDB(t, root, "w1"), "walsum")
	_, err = s3.Append(ctx, []Row{row("c", 3)})
	require.ErrorIs(t, err, ErrCorrupt, "replay must refuse a WAL object without its header")
	require.Contains(t, err.Error(), "no WAL header")
	require.Contains(t, err.Error(), objs[len(objs)-1].Key)

	// With its header back, everything replays.
	require.NoError(t, db.bucket.Put(ctx, objs[len(objs)-1].Key, raw))
	s4 := openGeneric(t, openTestDB(t, root, "w1"), "walsum")
	appendRows(t, s4, row("c", 3))
	require.Equal(t, map[string]int64{"a": 1, "b": 2, "c": 3}, allRows(t, s4, SourceAll))
}
