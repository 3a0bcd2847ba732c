package rowcodec

import (
	"time"
	"unsafe"
)

// The memory model of decoded rows, shared by what a memtable counts (memtable.bytes) and
// what an append is charged (append_limits.go).

// Sizes of the decoded form (Row): a Row in a []Row, one element of Row.Values (an interface).
const (
	rowHeaderBytes = int64(unsafe.Sizeof(Row{}))
	valueSlotBytes = int64(unsafe.Sizeof(any(nil)))
)

// MaxTombstoneBytes is the decoded size of the largest tombstone: a row of a schema's most
// fields with only its key, of MaxKeyBytes, set (Store.Delete's row).
const MaxTombstoneBytes = rowHeaderBytes + maxFields*valueSlotBytes + 16 + MaxKeyBytes

// DecodedValuesBytes estimates what r.Values holds: one slot per schema field, null or not,
// plus per non-null value its boxed copy and payload.
func DecodedValuesBytes(r Row) int64 {
	n := int64(len(r.Values)) * valueSlotBytes
	for _, v := range r.Values {
		switch x := v.(type) {
		case nil, bool: // a boxed bool is a static value
		case string:
			n += 16 + int64(len(x))
		case []byte:
			n += 24 + int64(len(x))
		case time.Time:
			n += 24
		default: // int64, float64
			n += 8
		}
	}
	return n
}

// DecodedRowsBytes is the decoded size of rows (their []Row included).
func DecodedRowsBytes(rows []Row) int64 {
	var n int64
	for _, r := range rows {
		n += rowHeaderBytes + DecodedValuesBytes(r)
	}
	return n
}
