package store

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// footerField is an integer field of a run's footer: its path of field ids and its bytes.
type footerField struct {
	path       []int16
	v          int64
	start, end int
}

// footerFields returns every integer field of a run's footer, in order, with offsets in data.
func footerFields(t *testing.T, data []byte) []footerField {
	t.Helper()
	footer := call(runFooter(data)).must(t)
	base := len(data) - parquetTrailer - len(footer)
	var got []footerField
	w := &thriftWalk{b: footer, field: func(path []int16, v int64, start, end int) error {
		got = append(got, footerField{slices.Clone(path), v, base + start, base + end})
		return nil
	}}
	require.NoError(t, w.value(tcStruct, 0))
	return got
}

// zigzagVarint is v as a thrift compact integer.
func zigzagVarint(v int64) []byte {
	return binary.AppendUvarint(nil, uint64(v<<1^v>>63))
}

// setFooterInts sets every integer field of the footer at path to v, re-encoding the footer's
// length (fields may grow: the footer is last, so no offset moves).
func setFooterInts(t *testing.T, data []byte, v int64, path ...int16) []byte {
	t.Helper()
	fields := footerFields(t, data)
	out, last, n := []byte(nil), 0, 0
	for _, f := range fields {
		if slices.Equal(f.path, path) {
			out = append(append(out, data[last:f.start]...), zigzagVarint(v)...)
			last = f.end
			n++
		}
	}
	require.NotZero(t, n, "footer field %v present", path)
	out = append(out, data[last:]...)
	footerLen := binary.LittleEndian.Uint32(data[len(data)-parquetTrailer:])
	binary.LittleEndian.PutUint32(out[len(out)-parquetTrailer:], footerLen+uint32(len(out)-len(data)))
	return out
}

// TestFindingDamagedRunFooterIsCorruptUnderAMemoryLimit: runs whose footer or page declares sizes their bytes
// cannot hold are ErrCorrupt before arrow-go allocates them, under a 3 GiB address-space
// limit. Each sets one declared size of a valid run (arrow-go v18.8.0 asked for 32 GiB of
// schema children, 4 TiB of levels for the rows, 1.6 GB for a list and 4 GiB for a Snappy
// block: a fatal out-of-memory).
func TestFindingDamagedRunFooterIsCorruptUnderAMemoryLimit(t *testing.T) {
	if !underMemoryLimit(t, 3<<30) {
		return
	}
	c := decodeFuzzCodec(t, nil)
	_, validRun := decodeFuzzSeeds(t)
	require.NoError(t, decodeRunErr(c, validRun))

	// FileMetaData: 2 schema, 3 num_rows, 4 row_groups; SchemaElement: 5 num_children;
	// RowGroup: 1 columns, 3 num_rows; ColumnChunk: 3 meta_data; ColumnMetaData: 3
	// path_in_schema, 4 codec, 9 data_page_offset, 11 dictionary_page_offset.
	rows := setFooterInts(t, setFooterInts(t, validRun, 1<<40, 3), 1<<40, 4, 3)

	// The first column's path_in_schema, a list of strings, declares 10^8 of them.
	bigList := func() []byte {
		footer := call(runFooter(validRun)).must(t)
		base := len(validRun) - parquetTrailer - len(footer)
		at := -1
		w := &thriftWalk{b: footer, list: func(path []int16, _ int, start int) error {
			if at < 0 && slices.Equal(path, []int16{4, 1, 3, 3}) {
				at = base + start
			}
			return nil
		}}
		require.NoError(t, w.value(tcStruct, 0))
		require.GreaterOrEqual(t, at, 0)
		require.Less(t, validRun[at]>>4, byte(15), "a short list header")
		header := binary.AppendUvarint([]byte{0xf0 | validRun[at]&0x0f}, 100_000_000)
		out := append(append(append([]byte(nil), validRun[:at]...), header...), validRun[at+1:]...)
		footerLen := binary.LittleEndian.Uint32(validRun[len(validRun)-parquetTrailer:])
		binary.LittleEndian.PutUint32(out[len(out)-parquetTrailer:], footerLen+uint32(len(header)-1))
		return out
	}()

	// firstPages returns where each column chunk's first page body is, its compressed size and
	// the chunk's codec.
	type page struct{ body, size, codec int64 }
	firstPages := func() []page {
		var pages []page
		var codec int64
		for _, f := range footerFields(t, validRun) {
			switch {
			case slices.Equal(f.path, []int16{4, 1, 3, 4}):
				codec = f.v
			case slices.Equal(f.path, []int16{4, 1, 3, 9}):
				pages = append(pages, page{body: f.v, codec: codec})
			case slices.Equal(f.path, []int16{4, 1, 3, 11}) && f.v > 0:
				pages[len(pages)-1].body = f.v
			}
		}
		for i, p := range pages {
			w := &thriftWalk{b: validRun[p.body:], field: func(path []int16, v int64, _, _ int) error {
				if slices.Equal(path, []int16{3}) { // PageHeader.compressed_page_size
					pages[i].size = v
				}
				return nil
			}}
			require.NoError(t, w.value(tcStruct, 0))
			pages[i].body += int64(w.off)
		}
		return pages
	}()
	// Every Snappy column's first page: its block declares 2^32-1 bytes.
	snappy := append([]byte(nil), validRun...)
	patched := 0
	for _, p := range firstPages {
		if p.codec == 1 && p.size >= 5 { // SNAPPY
			copy(snappy[p.body:], binary.AppendUvarint(nil, 1<<32-1))
			patched++
		}
	}
	require.NotZero(t, patched, "the run has Snappy pages")
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"schema element with 2^31-1 children", setFooterInts(t, validRun, 1<<31-1, 2, 5), "children"},
		{"2^40 rows", rows, "rows"},
		{"list of 10^8 strings", bigList, "elements"},
		{"Snappy block of 2^32-1 bytes", snappy, "snappy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeRunErr(c, tc.data)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Regexp(t, tc.want, err.Error())
		})
	}
}

// TestRunFooterCheckAcceptsWhatWalkeeperWrites: the footer check walks a valid run's footer
// to its end, seeing its schema and every column chunk.
func TestRunFooterCheckAcceptsWhatWalkeeperWrites(t *testing.T) {
	_, run := decodeFuzzSeeds(t)
	require.NoError(t, checkRunFooter(run))
	footer := call(runFooter(run)).must(t)
	w := &thriftWalk{b: footer}
	require.NoError(t, w.value(tcStruct, 0))
	require.Equal(t, len(footer), w.off)
	codecs := 0
	for _, f := range footerFields(t, run) {
		if slices.Equal(f.path, []int16{4, 1, 3, 4}) {
			codecs++
		}
	}
	require.Equal(t, decodeFuzzCodec(t, nil).ArrowSchema().NumFields(), codecs)
}
