package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// A run's Parquet footer is checked before arrow-go reads it, whose thrift reader allocates
// each list at its declared count (docs/RELIABILITY.md finding 18).

// parquetTrailer is the footer's length (4 bytes) and the "PAR1" magic that end a run.
const parquetTrailer = 4 + 4

// thriftDepthMax bounds the footer's nesting (thrift's own limit is 64; Parquet nests a few).
const thriftDepthMax = 64

// Thrift compact protocol types.
const (
	tcStop   = 0
	tcTrue   = 1
	tcFalse  = 2
	tcByte   = 3
	tcI16    = 4
	tcI32    = 5
	tcI64    = 6
	tcDouble = 7
	tcBinary = 8
	tcList   = 9
	tcSet    = 10
	tcMap    = 11
	tcStruct = 12
	tcUUID   = 13
)

// Field ids of parquet.thrift the check reads.
const (
	fmdSchema             = 2 // FileMetaData.schema: list<SchemaElement>
	schemaElemNumChildren = 5 // SchemaElement.num_children: i32
)

// thriftWalk walks thrift compact protocol bytes, calling field for every integer field and
// list for every list or set with the path of field ids from the outer struct.
type thriftWalk struct {
	b     []byte
	off   int
	path  []int16
	field func(path []int16, v int64, start, end int) error
	list  func(path []int16, n int, start int) error
}

var errThriftShort = errors.New("ends inside a value")

func (w *thriftWalk) byte1() (byte, error) {
	if w.off >= len(w.b) {
		return 0, errThriftShort
	}
	w.off++
	return w.b[w.off-1], nil
}

func (w *thriftWalk) uvarint() (uint64, error) {
	v, n := binary.Uvarint(w.b[w.off:])
	if n <= 0 {
		if n == 0 {
			return 0, errThriftShort
		}
		return 0, fmt.Errorf("varint at %d overflows", w.off)
	}
	w.off += n
	return v, nil
}

func (w *thriftWalk) zigzag() (int64, error) {
	u, err := w.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

// count reads a container's element count, refusing one the bytes left cannot hold.
func (w *thriftWalk) count(n uint64) (int, error) {
	if n > uint64(len(w.b)-w.off) {
		return 0, fmt.Errorf("container at %d declares %d elements in %d bytes", w.off, n, len(w.b)-w.off)
	}
	return int(n), nil
}

// value skips one value of compact type typ, at nesting depth.
func (w *thriftWalk) value(typ byte, depth int) error {
	if depth > thriftDepthMax {
		return fmt.Errorf("nested more than %d deep at %d", thriftDepthMax, w.off)
	}
	start := w.off
	switch typ {
	case tcTrue, tcFalse: // a field's value is in its header; a list's element is one byte
		return nil
	case tcByte:
		_, err := w.byte1()
		return err
	case tcI16, tcI32, tcI64:
		v, err := w.zigzag()
		if err == nil && w.field != nil {
			err = w.field(w.path, v, start, w.off)
		}
		return err
	case tcDouble, tcUUID:
		n := 8
		if typ == tcUUID {
			n = 16
		}
		if len(w.b)-w.off < n {
			return errThriftShort
		}
		w.off += n
		return nil
	case tcBinary:
		n, err := w.uvarint()
		if err != nil {
			return err
		}
		if n > uint64(len(w.b)-w.off) {
			return fmt.Errorf("binary at %d declares %d bytes of %d left", start, n, len(w.b)-w.off)
		}
		w.off += int(n)
		return nil
	case tcList, tcSet:
		h, err := w.byte1()
		if err != nil {
			return err
		}
		size := uint64(h >> 4)
		if size == 15 {
			if size, err = w.uvarint(); err != nil {
				return err
			}
		}
		n, err := w.count(size)
		if err != nil {
			return err
		}
		if w.list != nil {
			if err := w.list(w.path, n, start); err != nil {
				return err
			}
		}
		for range n {
			if err := w.elem(h&0x0f, depth+1); err != nil {
				return err
			}
		}
		return nil
	case tcMap:
		size, err := w.uvarint()
		if err != nil {
			return err
		}
		n, err := w.count(size)
		if err != nil || n == 0 {
			return err
		}
		kv, err := w.byte1()
		if err != nil {
			return err
		}
		for range n {
			for _, t := range []byte{kv >> 4, kv & 0x0f} { // a key, then a value
				if err := w.elem(t, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	case tcStruct:
		var id int16
		for {
			h, err := w.byte1()
			if err != nil {
				return err
			}
			if h == tcStop {
				return nil
			}
			if delta := int16(h >> 4); delta != 0 {
				id += delta
			} else {
				v, err := w.zigzag()
				if err != nil {
					return err
				}
				id = int16(v)
			}
			w.path = append(w.path, id)
			err = w.value(h&0x0f, depth+1)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown thrift type %d at %d", typ, start)
	}
}

// elem skips one element of a list, set or map, where a bool is a byte of its own.
func (w *thriftWalk) elem(typ byte, depth int) error {
	if typ == tcTrue || typ == tcFalse {
		_, err := w.byte1()
		return err
	}
	return w.value(typ, depth)
}

// runFooter returns the thrift bytes of a run's footer.
func runFooter(data []byte) ([]byte, error) {
	if len(data) < 4+parquetTrailer || !bytes.Equal(data[len(data)-4:], []byte("PAR1")) {
		return nil, errors.New("not a Parquet file")
	}
	n := uint64(binary.LittleEndian.Uint32(data[len(data)-parquetTrailer:]))
	if n > uint64(len(data)-4-parquetTrailer) {
		return nil, fmt.Errorf("footer of %d bytes in a file of %d", n, len(data))
	}
	end := len(data) - parquetTrailer
	return data[end-int(n) : end], nil
}

// checkRunFooter refuses a footer with a count or length beyond the bytes left, or a schema
// element whose child count is negative or not smaller than the schema's element count.
func checkRunFooter(data []byte) error {
	footer, err := runFooter(data)
	if err != nil {
		return err
	}
	elements := 0
	w := &thriftWalk{b: footer}
	w.list = func(path []int16, n int, _ int) error {
		if len(path) == 1 && path[0] == fmdSchema {
			elements = n
		}
		return nil
	}
	w.field = func(path []int16, v int64, _, _ int) error {
		if len(path) == 2 && path[0] == fmdSchema && path[1] == schemaElemNumChildren && (v < 0 || v >= int64(elements)) {
			return fmt.Errorf("a schema element declares %d children of %d elements", v, elements)
		}
		return nil
	}
	if err := w.value(tcStruct, 0); err != nil {
		return fmt.Errorf("footer: %w", err)
	}
	return nil
}

// checkedSnappy refuses a block declaring more bytes than its page, which arrow-go's Snappy
// decoder would allocate first.
type checkedSnappy struct {
	snappyCodec
}

type snappyCodec interface {
	compress.ErrorCodec
	compress.StreamingCodec
}

func (c checkedSnappy) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err) // as arrow-go's codecs do; compress.Decode recovers it
	}
	return out
}

func (c checkedSnappy) DecodeWithError(dst, src []byte) ([]byte, error) {
	if n, k := binary.Uvarint(src); k > 0 && n > uint64(len(dst)) {
		return nil, fmt.Errorf("snappy block declares %d bytes for a page of %d", n, len(dst))
	}
	return c.snappyCodec.DecodeWithError(dst, src)
}

func init() {
	codec, err := compress.GetCodec(compress.Codecs.Snappy)
	if err != nil {
		panic(err)
	}
	compress.RegisterCodec(compress.Codecs.Snappy, checkedSnappy{codec.(snappyCodec)})
}
