package rowcodec

import (
	"reflect"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCopyRecordRows: copyCells copies every field type, nulls and the system columns from
// several records into one, in any order, and copyRecordRows releases what it allocates.
func TestCopyRecordRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	tc := roundTripCases()["generic"]
	c := testCodec(t, tc.kind)
	rows, err := c.DecodeJSON([]byte(tc.body), 4096)
	if err != nil {
		t.Fatal(err)
	}
	// Two source records: rows 0-2 from shard a, rows 3-4 from shard b with a tombstone.
	a, err := c.Build(mem, rows[:3], []int64{1, 2, 3}, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := c.Build(mem, rows[3:], []int64{4, 5}, "b", []bool{false, true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()

	type src struct {
		rec arrow.RecordBatch
		i   int
	}
	picks := []src{{b, 1}, {a, 0}, {b, 0}, {a, 2}, {a, 1}}
	out := copyRecordRows(mem, c.ArrowSchema(), len(picks), func(k int) (arrow.RecordBatch, int) {
		return picks[k].rec, picks[k].i
	})
	defer out.Release()
	if err := c.CheckRecord(out); err != nil {
		t.Fatal(err)
	}
	if out.NumRows() != int64(len(picks)) {
		t.Fatalf("rows = %d, want %d", out.NumRows(), len(picks))
	}
	for k, p := range picks {
		if got, want := c.RowJSON(out, k), c.RowJSON(p.rec, p.i); !reflect.DeepEqual(got, want) {
			t.Errorf("row %d = %v, want %v", k, got, want)
		}
		if c.KeyAt(out, k) != c.KeyAt(p.rec, p.i) || c.SeqAt(out, k) != c.SeqAt(p.rec, p.i) ||
			c.ShardAt(out, k) != c.ShardAt(p.rec, p.i) || c.DeletedAt(out, k) != c.DeletedAt(p.rec, p.i) {
			t.Errorf("row %d: system columns differ from the source", k)
		}
	}
	empty := copyRecordRows(mem, c.ArrowSchema(), 0, nil)
	defer empty.Release()
	if empty.NumRows() != 0 {
		t.Fatalf("empty copy has %d rows", empty.NumRows())
	}
}
