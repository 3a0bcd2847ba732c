package rowcodec

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/walkeeper/walkeeper/target"
)

// Stored records: the schema check and typed access to the key and system columns.

// CheckRecord verifies that rec has exactly ArrowSchema (field names, types, nullability; a
// walkeeper.kind metadata entry, when present, must name this kind), that its columns match,
// and that the key and system columns hold no nulls. Anything else is ErrCorrupt.
func (c *Codec) CheckRecord(rec arrow.RecordBatch) error {
	if rec == nil {
		return corruptf("record is nil")
	}
	sc := rec.Schema()
	if sc == nil {
		return corruptf("record has no schema")
	}
	if !sc.Equal(c.arrow) {
		return corruptf("record schema does not match the %s store schema: %s", c.kind, arrowDiff(c.arrow, sc))
	}
	if k, ok := sc.Metadata().GetValue(MetadataKind); ok && k != string(c.kind) {
		return corruptf("record is of kind %q, want %q", target.Clip(k), c.kind)
	}
	if int(rec.NumCols()) != sc.NumFields() {
		return corruptf("record has %d columns for %d schema fields", rec.NumCols(), sc.NumFields())
	}
	rows := rec.NumRows()
	for j, col := range rec.Columns() {
		f := sc.Field(j)
		if col == nil || int64(col.Len()) != rows || !arrow.TypeEqual(col.DataType(), f.Type) {
			return corruptf("record column %d %q does not match its schema field", j, f.Name)
		}
		if !f.Nullable && col.NullN() != 0 {
			return corruptf("record column %q has %d nulls in a non-null column", f.Name, col.NullN())
		}
	}
	if n := rec.Column(c.key).NullN(); n != 0 {
		return corruptf("record key column %q has %d nulls", c.names[c.key], n)
	}
	return nil
}

// arrowDiff describes the first difference between two Arrow schemas.
func arrowDiff(want, got *arrow.Schema) string {
	wf, gf := want.Fields(), got.Fields()
	for j := 0; j < len(wf) && j < len(gf); j++ {
		if !wf[j].Equal(gf[j]) {
			return fmt.Sprintf("column %d: want %s, got %s", j, wf[j], gf[j])
		}
	}
	return fmt.Sprintf("want %d columns, got %d", len(wf), len(gf))
}

// RecordView gives typed, allocation-free access to the key and system columns of one record,
// the hot path of merges and reads; it does not retain the record.
type RecordView struct {
	key     *array.String
	seq     *array.Int64
	shard   *array.String
	deleted *array.Boolean
}

// View type-asserts the key and system columns of rec once, by name (so a projection works);
// missing, duplicated, mistyped, mis-sized or null columns are ErrCorrupt.
func (c *Codec) View(rec arrow.RecordBatch) (RecordView, error) {
	if rec == nil || rec.Schema() == nil {
		return RecordView{}, corruptf("record is nil")
	}
	var v RecordView
	var errs [4]error
	v.key, errs[0] = viewColumn[*array.String](rec, c.names[c.key])
	v.seq, errs[1] = viewColumn[*array.Int64](rec, ColSeq)
	v.shard, errs[2] = viewColumn[*array.String](rec, ColShard)
	v.deleted, errs[3] = viewColumn[*array.Boolean](rec, ColDeleted)
	for _, err := range errs { // the first failing column's, in the order above
		if err != nil {
			return RecordView{}, err
		}
	}
	return v, nil
}

func viewColumn[T arrow.Array](rec arrow.RecordBatch, name string) (T, error) {
	var zero T
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return zero, corruptf("record has %d columns named %q, want 1", len(idx), name)
	}
	if int64(idx[0]) >= rec.NumCols() {
		return zero, corruptf("record column %q is missing", name)
	}
	col := rec.Column(idx[0])
	a, ok := col.(T)
	if !ok {
		return zero, corruptf("record column %q has type %s", name, col.DataType())
	}
	if int64(a.Len()) != rec.NumRows() {
		return zero, corruptf("record column %q has %d rows, the record %d", name, a.Len(), rec.NumRows())
	}
	if a.NullN() != 0 {
		return zero, corruptf("record column %q has %d nulls", name, a.NullN())
	}
	return a, nil
}

// Key returns the key of row i.
func (v RecordView) Key(i int) string { return v.key.Value(i) }

// Seq returns the write sequence of row i.
func (v RecordView) Seq(i int) int64 { return v.seq.Value(i) }

// Shard returns the shard that wrote row i.
func (v RecordView) Shard(i int) string { return v.shard.Value(i) }

// Deleted reports whether row i is a tombstone.
func (v RecordView) Deleted(i int) bool { return v.deleted.Value(i) }
