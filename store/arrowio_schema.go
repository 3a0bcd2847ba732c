package store

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Stored schemas and IPC batch metadata are walked before arrow reads them, because arrow
// allocates at every count they declare (docs/RELIABILITY.md findings 10 and 17).

// schemaFlatbufferTypes are the flatbuffer Type tags walkeeper writes: Int, FloatingPoint,
// Binary, Utf8, Bool and Timestamp.
var schemaFlatbufferTypes = [...]bool{2: true, 3: true, 4: true, 5: true, 6: true, 10: true}

const flatbufferTypeTimestamp = 10

// fbReader reads a flatbuffer as the flatbuffers Go runtime does, checking every read; the
// first failure sticks in err and later reads return zeros.
type fbReader struct {
	b []byte
	// left is what vectors and strings not yet seen may claim, so shared ones cannot make
	// arrow copy one long string many times.
	left int
	err  error
}

func newFBReader(b []byte) *fbReader { return &fbReader{b: b, left: len(b)} }

func (r *fbReader) failf(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *fbReader) in(at uint32, n uint64) bool {
	if r.err != nil {
		return false
	}
	if uint64(at)+n > uint64(len(r.b)) {
		r.failf("offset %d+%d beyond its %d bytes", at, n, len(r.b))
		return false
	}
	return true
}

// bytesAt returns the buffer from at on when its n bytes are in it, else n zero bytes.
func (r *fbReader) bytesAt(at uint32, n uint64) []byte {
	if !r.in(at, n) {
		return fbZeros[:]
	}
	return r.b[at:]
}

var fbZeros [8]byte

func (r *fbReader) u8(at uint32) uint8   { return r.bytesAt(at, 1)[0] }
func (r *fbReader) u16(at uint32) uint16 { return binary.LittleEndian.Uint16(r.bytesAt(at, 2)) }
func (r *fbReader) u32(at uint32) uint32 { return binary.LittleEndian.Uint32(r.bytesAt(at, 4)) }
func (r *fbReader) u64(at uint32) uint64 { return binary.LittleEndian.Uint64(r.bytesAt(at, 8)) }

// ref returns the position the offset stored at at points to (a table, vector or string).
func (r *fbReader) ref(at uint32) uint32 { return at + r.u32(at) }

// slot returns where the table at tab stores the field of vtable offset slot (4 for the
// first field, 6 for the second, … as in arrow's generated code), 0 if it stores none.
func (r *fbReader) slot(tab uint32, slot uint16) uint32 {
	vt := uint32(int32(tab) - int32(r.u32(tab)))
	if slot >= r.u16(vt) {
		return 0
	}
	if o := r.u16(vt + uint32(slot)); o != 0 && r.err == nil {
		return tab + uint32(o)
	}
	return 0
}

// vector returns the first element and the length of the vector referenced at at (none if at
// is 0, a field that is absent), whose elements of size bytes must lie in the buffer and in
// what is left to claim.
func (r *fbReader) vector(at uint32, size int) (first uint32, n int) {
	if at == 0 {
		return 0, 0
	}
	v := r.ref(at)
	n = int(r.u32(v))
	first = v + 4
	if !r.in(first, uint64(n)*uint64(size)) {
		return 0, 0
	}
	if r.left -= 4 + n*size; r.left < 0 {
		r.failf("its vectors and strings claim more than its %d bytes", len(r.b))
		return 0, 0
	}
	return first, n
}

// str checks the string referenced at at, if at is a field that is present.
func (r *fbReader) str(at uint32) { r.vector(at, 1) }

// keyValues checks a custom_metadata list (KeyValue tables of two strings) stored at at.
func (r *fbReader) keyValues(at uint32) {
	first, n := r.vector(at, 4)
	for i := 0; i < n && r.err == nil; i++ {
		kv := r.ref(first + uint32(4*i))
		r.str(r.slot(kv, 4))
		r.str(r.slot(kv, 6))
	}
}

// schema checks the Schema table at tab against want (see the top of the file).
func (r *fbReader) schema(tab uint32, want *arrow.Schema) {
	r.keyValues(r.slot(tab, 8))
	first, n := r.vector(r.slot(tab, 6), 4)
	if r.err == nil && n != want.NumFields() {
		r.failf("%d columns, want %d", n, want.NumFields())
	}
	for i := 0; i < n && r.err == nil; i++ {
		f := r.ref(first + uint32(4*i))
		r.str(r.slot(f, 4)) // name
		var typ uint8
		if at := r.slot(f, 8); at != 0 {
			typ = r.u8(at)
		}
		switch {
		case r.err != nil:
		case int(typ) >= len(schemaFlatbufferTypes) || !schemaFlatbufferTypes[typ]:
			r.failf("column %d has type tag %d, not one walkeeper writes", i, typ)
		case typ == flatbufferTypeTimestamp:
			if at := r.slot(f, 10); at != 0 {
				r.str(r.slot(r.ref(at), 6)) // time zone
			}
		}
		if r.slot(f, 12) != 0 {
			r.failf("column %d is dictionary-encoded", i)
		}
		if _, k := r.vector(r.slot(f, 14), 4); k != 0 {
			r.failf("column %d has %d children", i, k)
		}
		r.keyValues(r.slot(f, 16))
	}
}

// checkIPCFile checks an Arrow IPC file's footer schema and record batch messages.
func checkIPCFile(data []byte, want *arrow.Schema) error {
	const trailer = 10        // footer length (4 bytes) and "ARROW1"
	const frame = 8 + trailer // and the leading "ARROW1\0\0"
	if len(data) < frame+8 {
		return fmt.Errorf("too short for an Arrow file (%d bytes)", len(data))
	}
	size := int(binary.LittleEndian.Uint32(data[len(data)-trailer:]))
	if size <= 0 || size > len(data)-frame {
		return fmt.Errorf("footer of %d bytes in a file of %d", size, len(data))
	}
	footer := data[len(data)-trailer-size : len(data)-trailer]
	r := newFBReader(footer)
	at := r.slot(r.ref(0), 6) // Footer.schema
	if at == 0 && r.err == nil {
		r.failf("footer without a schema")
	}
	r.schema(r.ref(at), want)
	if r.err != nil {
		return fmt.Errorf("schema: %w", r.err)
	}
	return checkIPCBatches(data, footer)
}

// checkIPCBatches refuses compressed batches, key-value lists that do not fit and blocks out
// of order, since arrow-go allocates at their declared sizes and counts.
func checkIPCBatches(data, footer []byte) error {
	r := newFBReader(footer)
	first, n := r.vector(r.slot(r.ref(0), 10), 24) // Footer.recordBatches: Blocks of 24 bytes
	if r.err != nil {
		return fmt.Errorf("footer: %w", r.err)
	}
	var end int64
	for i := 0; i < n; i++ {
		blk := r.b[first+uint32(24*i):]
		off := int64(binary.LittleEndian.Uint64(blk))
		meta := int64(int32(binary.LittleEndian.Uint32(blk[8:])))
		body := int64(binary.LittleEndian.Uint64(blk[16:]))
		if off < end || meta < 8 || body < 0 || meta > int64(len(data))-off || body > int64(len(data))-off-meta {
			return fmt.Errorf("record batch %d: block of %d+%d bytes at %d", i, meta, body, off)
		}
		end = off + meta + body
		m := data[off : off+meta]
		prefix := 4 // the metadata length, after a continuation marker since Arrow 0.15
		if binary.LittleEndian.Uint32(m) == 0xFFFFFFFF {
			prefix = 8
		}
		mr := newFBReader(m[prefix:])
		msg := mr.ref(0)
		mr.keyValues(mr.slot(msg, 12))                        // Message.custom_metadata
		if at := mr.slot(msg, 6); at == 0 || mr.u8(at) != 3 { // Message.header_type: RecordBatch
			mr.failf("not a record batch")
		}
		if at := mr.slot(msg, 8); at != 0 && mr.slot(mr.ref(at), 10) != 0 { // RecordBatch.compression
			mr.failf("compressed")
		}
		if mr.err != nil {
			return fmt.Errorf("record batch %d: %w", i, mr.err)
		}
	}
	return nil
}

// arrowSchemaKey is where pqarrow stores the Arrow schema in a Parquet file's metadata.
const arrowSchemaKey = "ARROW:schema"

// checkStoredArrowSchema checks pqarrow's ARROW:schema, if stored, decoded as pqarrow does.
func checkStoredArrowSchema(kv metadata.KeyValueMetadata, want *arrow.Schema) error {
	v := kv.FindValue(arrowSchemaKey)
	if v == nil {
		return nil // pqarrow derives the Arrow schema from the Parquet one
	}
	var msg []byte
	var err error
	if len(*v)%4 == 0 {
		msg, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(msg) == 0 || err != nil {
		msg, err = base64.RawStdEncoding.DecodeString(*v)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", arrowSchemaKey, err)
	}
	// An optional continuation marker, the metadata length and the Message flatbuffer.
	if len(msg) >= 4 && binary.LittleEndian.Uint32(msg) == 0xFFFFFFFF {
		msg = msg[4:]
	}
	if len(msg) < 8 {
		return fmt.Errorf("%s: %d bytes, no message", arrowSchemaKey, len(msg))
	}
	n := int64(int32(binary.LittleEndian.Uint32(msg)))
	if n < 4 || n > int64(len(msg)-4) {
		return fmt.Errorf("%s: message of %d bytes in %d", arrowSchemaKey, n, len(msg)-4)
	}
	r := newFBReader(msg[4 : 4+n])
	m := r.ref(0)
	if at := r.slot(m, 6); at == 0 || r.u8(at) != 1 { // Message.header_type: Schema
		r.failf("not a schema message")
	}
	if at := r.slot(m, 10); at != 0 && r.u64(at) > uint64(int64(len(msg))-4-n) { // Message.bodyLength
		r.failf("declares a body of %d bytes", r.u64(at))
	}
	if at := r.slot(m, 8); at != 0 { // Message.header
		r.schema(r.ref(at), want)
	} else {
		r.failf("message without a header")
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", arrowSchemaKey, r.err)
	}
	return nil
}
