package store

import (
	"fmt"
	"testing"

	"github.com/google/btree"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// iterRow is one row version of a test source: key, value, write sequence, tombstone.
type iterRow struct {
	key string
	n   int64
	seq int64
	del bool
}

func iterCodec(t *testing.T) *rowcodec.Codec {
	t.Helper()
	return call(rowcodec.NewCodec(KindGeneric, Schema{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "n", Type: TypeInt64, Nullable: true}}})).must(t)
}

// iterFile builds a decoded sorted file of shard from rows (sorted by key).
func iterFile(t *testing.T, c *rowcodec.Codec, shard string, rows ...iterRow) *sortedFile {
	t.Helper()
	var rs []Row
	var seqs []int64
	var dels []bool
	for _, r := range rows {
		rs = append(rs, Row{Key: r.key, Values: []any{r.key, r.n}})
		seqs = append(seqs, r.seq)
		dels = append(dels, r.del)
	}
	rec := call(c.Build(nil, rs, seqs, shard, dels)).must(t)
	t.Cleanup(rec.Release)
	view := call(c.View(rec)).must(t)
	return &sortedFile{path: shard, rec: rec, view: view, n: int(rec.NumRows()), bytes: recordBytes(rec)}
}

// describe renders what a merge kept: key=value@seq/shard, "-" for a tombstone.
func describe(v version) string {
	val := "-"
	if !v.deleted {
		if v.file != nil {
			val = fmt.Sprint(v.file.view.Key(v.row) + ":" + fmt.Sprint(v.file.rec.Column(1).ValueStr(v.row)))
		} else {
			val = fmt.Sprint(v.mem.Key + ":" + fmt.Sprint(v.mem.Values[1]))
		}
	}
	return fmt.Sprintf("%s@%d/%s", val, v.seq, v.shard)
}

// The shared iterator keeps the newest version per key: highest write sequence, ties broken
// by the larger shard id, the memtable competing like any file.
func TestMergeIterNewestPerKey(t *testing.T) {
	c := iterCodec(t)
	f1 := iterFile(t, c, "s1", iterRow{"a", 1, 1, false}, iterRow{"b", 1, 5, false}, iterRow{"d", 1, 9, false})
	f2 := iterFile(t, c, "s2", iterRow{"a", 2, 3, false}, iterRow{"b", 2, 5, false}, iterRow{"c", 2, 2, true})
	empty := iterFile(t, c, "s3")
	mt := newMemtable()
	mt.add(memRow{row: Row{Key: "c", Values: []any{"c", int64(7)}}, seq: 4})
	mt.add(memRow{row: Row{Key: "d", Values: []any{"d", int64(7)}}, seq: 8, deleted: true})
	mt.add(memRow{row: Row{Key: "e", Values: []any{"e", int64(7)}}, seq: 1})
	mem := &cursor{memShard: "s0", mem: newMemIter([]*btree.BTreeG[*memEntry]{mt.index}, "")}
	it := newMergeIter([]*cursor{{file: f1}, {file: empty}, {file: f2}, mem})
	var got []string
	for {
		h, ok := it.next()
		if !ok {
			break
		}
		got = append(got, describe(h.version()))
	}
	require.Equal(t, []string{
		"a:2@3/s2", // newer sequence wins
		"b:2@5/s2", // equal sequence: larger shard id wins
		"c:7@4/s0", // the memtable's version is newer than a file's tombstone
		"d:1@9/s1", // a file's version newer than the memtable's tombstone
		"e:7@1/s0",
	}, got)
	require.False(t, it.more())
}

// mergeSorted, the merge and compaction side of the iterator, yields the same winners, and
// drop removes survivors without letting an older version of the key through.
func TestMergeSortedDrop(t *testing.T) {
	c := iterCodec(t)
	older := iterFile(t, c, "s1", iterRow{"a", 1, 1, false}, iterRow{"b", 1, 1, false}, iterRow{"c", 1, 1, false})
	newer := iterFile(t, c, "s1", iterRow{"b", 2, 2, true}, iterRow{"c", 2, 3, false})
	keys := func(picks []pick) []string {
		var out []string
		for _, p := range picks {
			out = append(out, fmt.Sprintf("%s@%d", p.key(), p.f.view.Seq(p.i)))
		}
		return out
	}
	require.Equal(t, []string{"a@1", "b@2", "c@3"}, keys(mergeSorted([]*sortedFile{older, newer})))
	require.Equal(t, []string{"a@1", "b@2", "c@3"}, keys(mergeSorted([]*sortedFile{newer, older})), "the newest version wins in any file order")
	require.Empty(t, mergeSorted(nil))
}
