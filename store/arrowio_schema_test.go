package store

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// memLimitEnv names the test a child process runs under an address-space limit.
const memLimitEnv = "WALKEEPER_TEST_MEMLIMIT_CHILD"

// memLimitSuffix ends the name of every test that runs under an address-space limit.
const memLimitSuffix = "UnderAMemoryLimit"

// underMemoryLimit runs the calling test again in a child process whose address space is
// limited to limit bytes, so that a regression to a huge allocation fails the test instead of
// taking the shared machine's memory. It returns true in the child, which then runs the
// test's body; the parent fails if the child does not pass.
//
// REQUIRES: the test's name ends in memLimitSuffix, which is how scripts/test.sh finds the
// tests to run without the race detector, under which they cannot run.
func underMemoryLimit(t *testing.T, limit uint64) bool {
	t.Helper()
	if !strings.HasSuffix(t.Name(), memLimitSuffix) {
		t.Fatalf("%s runs under a memory limit: its name must end in %s", t.Name(), memLimitSuffix)
	}
	if os.Getenv(memLimitEnv) == t.Name() {
		var rl syscall.Rlimit
		require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_AS, &rl))
		rl.Cur = min(limit, rl.Max) // a lower limit set by the caller stays
		rl.Max = rl.Cur
		require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &rl))
		return true
	}
	if raceEnabled {
		t.Skip("the race detector reserves terabytes of address space: no limit can apply")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), memLimitEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("under a %d GiB address-space limit: %v\n%s", limit>>30, err, out)
	}
	return false
}

// fbVectorLenAt returns where the length of the vector in field slot of the table at tab is.
func fbVectorLenAt(t *testing.T, b []byte, tab uint32, slot uint16) uint32 {
	t.Helper()
	r := newFBReader(b)
	at := r.slot(tab, slot)
	require.NotZero(t, at, "slot %d present", slot)
	v := r.ref(at)
	require.NoError(t, r.err)
	return v
}

// ipcFooter returns the footer of an Arrow IPC file (a slice of it) and its Schema table.
func ipcFooter(t *testing.T, data []byte) (footer []byte, schema uint32) {
	t.Helper()
	size := int(binary.LittleEndian.Uint32(data[len(data)-10:]))
	footer = data[len(data)-10-size : len(data)-10]
	r := newFBReader(footer)
	schema = r.ref(r.slot(r.ref(0), 6))
	require.NoError(t, r.err)
	return footer, schema
}

// patchStoredSchema rewrites the ARROW:schema value of a Parquet run in place with edit
// applied to its decoded bytes (an IPC schema message), keeping its length.
func patchStoredSchema(t *testing.T, run []byte, edit func(msg []byte)) []byte {
	t.Helper()
	pf := call(file.NewParquetReader(bytes.NewReader(run))).must(t)
	v := pf.MetaData().KeyValueMetadata().FindValue(arrowSchemaKey)
	require.NoError(t, pf.Close())
	require.NotNil(t, v, "a run stores its Arrow schema")
	msg := call(base64.StdEncoding.DecodeString(*v)).must(t)
	edit(msg)
	require.Equal(t, 1, bytes.Count(run, []byte(*v)))
	return bytes.Replace(run, []byte(*v), []byte(base64.StdEncoding.EncodeToString(msg)), 1)
}

// TestFindingDamagedSchemaIsCorruptUnderAMemoryLimit: objects whose schema declares counts their bytes cannot
// hold decode to ErrCorrupt before arrow reads the schema, under an 8 GiB address-space
// limit. The first two are what the decode fuzzers found (arrow-go v18.8.0 asked for 347 GB
// and 82 GB: a fatal out-of-memory); the others set one declared count of a valid object.
func TestFindingDamagedSchemaIsCorruptUnderAMemoryLimit(t *testing.T) {
	if !underMemoryLimit(t, 8<<30) {
		return
	}
	c := decodeFuzzCodec(t, nil)
	decodeGen := func(data []byte) error {
		recs, err := decodeIPC(memory.DefaultAllocator, data, c, "generation")
		releaseAll(recs)
		return err
	}
	decodeRun := func(data []byte) error { return decodeRunErr(c, data) }
	validGen, validRun := decodeFuzzSeeds(t)
	require.NoError(t, decodeGen(validGen))
	require.NoError(t, decodeRun(validRun))
	setU32 := func(b []byte, at uint32, v uint32) { binary.LittleEndian.PutUint32(b[at:], v) }
	genWith := func(edit func(footer []byte, schema uint32)) []byte {
		data := append([]byte(nil), validGen...)
		edit(ipcFooter(t, data))
		return data
	}
	runWith := func(edit func(meta []byte, schema uint32)) []byte {
		return patchStoredSchema(t, validRun, func(msg []byte) {
			meta := msg[8:] // after the continuation marker and the length
			r := newFBReader(meta)
			schema := r.ref(r.slot(r.ref(0), 8))
			require.NoError(t, r.err)
			edit(meta, schema)
		})
	}
	firstField := func(b []byte, schema uint32) uint32 {
		r := newFBReader(b)
		return r.ref(fbVectorLenAt(t, b, schema, 6) + 4)
	}
	for _, tc := range []struct {
		name string
		run  bool
		data []byte
		want string
	}{
		{"fuzz crasher: generation, huge child count", false,
			readCorpusBytes(t, filepath.Join("testdata", "fuzz", "FuzzDecodeGeneration", "d21c188edece6bb7")), "schema"},
		{"fuzz crasher: run, garbled ARROW:schema", true,
			readCorpusBytes(t, filepath.Join("testdata", "fuzz", "FuzzDecodeRun", "228c4636c4b9fe79")), "ARROW:schema"},
		{"generation, child count 2^31-1", false, genWith(func(b []byte, schema uint32) {
			setU32(b, fbVectorLenAt(t, b, firstField(b, schema), 14), 1<<31-1)
		}), "beyond its"},
		{"generation, schema key-value count 2^30", false, genWith(func(b []byte, schema uint32) {
			setU32(b, fbVectorLenAt(t, b, schema, 8), 1<<30)
		}), "beyond its"},
		{"generation, column count 2^30", false, genWith(func(b []byte, schema uint32) {
			setU32(b, fbVectorLenAt(t, b, schema, 6), 1<<30)
		}), "beyond its"},
		{"generation, one child", false, genWith(func(b []byte, schema uint32) {
			setU32(b, fbVectorLenAt(t, b, firstField(b, schema), 14), 1)
		}), "children|beyond its"},
		{"run, child count 2^31-1", true, runWith(func(b []byte, schema uint32) {
			setU32(b, fbVectorLenAt(t, b, firstField(b, schema), 14), 1<<31-1)
		}), "beyond its"},
		{"run, schema key-value count 2^30", true, runWith(func(b []byte, schema uint32) {
			setU32(b, fbVectorLenAt(t, b, schema, 8), 1<<30)
		}), "beyond its"},
		{"run, message length 2^31-1", true, patchStoredSchema(t, validRun, func(msg []byte) {
			setU32(msg, 4, 1<<31-1)
		}), "message of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decode := decodeGen
			if tc.run {
				decode = decodeRun
			}
			err := decode(tc.data)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Regexp(t, tc.want, err.Error())
		})
	}
}

// TestStoredSchemaOfEveryKindPassesTheCheck: the schema of every kind's generations and
// runs, as the current encoder writes them, is one the check before arrow accepts.
func TestStoredSchemaOfEveryKindPassesTheCheck(t *testing.T) {
	for _, tc := range []struct {
		kind   Kind
		schema Schema
	}{{KindRollout, Schema{}}, {KindDatagen, Schema{}}, {KindGeneric, testSchema}, {KindGeneric, decodeFuzzSchema}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			c := call(rowcodec.NewCodec(tc.kind, tc.schema)).must(t)
			empty := copyRows(nil, c.ArrowSchema(), nil)
			defer empty.Release()
			gen := call(encodeIPC(c.ArrowSchema(), empty)).must(t)
			require.NoError(t, checkIPCFile(gen, c.ArrowSchema()))
			marker := call(encodeIPC(c.ArrowSchema())).must(t)
			require.NoError(t, checkIPCFile(marker, c.ArrowSchema()))
			run := call(encodeParquet(c.ArrowSchema(), empty)).must(t)
			pf := call(file.NewParquetReader(bytes.NewReader(run))).must(t)
			defer pf.Close()
			require.NotNil(t, pf.MetaData().KeyValueMetadata().FindValue(arrowSchemaKey))
			require.NoError(t, checkStoredArrowSchema(pf.MetaData().KeyValueMetadata(), c.ArrowSchema()))
		})
	}
}

// ipcBlocks returns where in data each record batch block of an IPC file's footer is (an
// offset, a metadata length and a body length: 24 bytes).
func ipcBlocks(t *testing.T, data []byte) []int {
	t.Helper()
	footer, _ := ipcFooter(t, data)
	r := newFBReader(footer)
	first, n := r.vector(r.slot(r.ref(0), 10), 24)
	require.NoError(t, r.err)
	base := len(data) - 10 - len(footer)
	blocks := make([]int, n)
	for i := range blocks {
		blocks[i] = base + int(first) + 24*i
	}
	return blocks
}

// TestFindingDamagedBatchMetadataIsCorruptUnderAMemoryLimit: record batch messages that would make arrow
// allocate at a size they declare (a compressed buffer's uncompressed length, a key-value
// count), or a footer that lists one batch twice, are ErrCorrupt before arrow loads a batch,
// under an 8 GiB address-space limit. walkeeper writes none of them.
func TestFindingDamagedBatchMetadataIsCorruptUnderAMemoryLimit(t *testing.T) {
	if !underMemoryLimit(t, 8<<30) {
		return
	}
	c := decodeFuzzCodec(t, nil)
	rec := call(c.Build(nil, []Row{{Key: "a", Values: []any{"a", int64(1), 1.5, true, []byte("b"), nil, "s"}}}, []int64{1}, "shard", nil)).must(t)
	defer rec.Release()
	write := func(r arrow.RecordBatch, opts ...ipc.Option) []byte {
		var buf bytes.Buffer
		w := call(ipc.NewFileWriter(&buf, append(opts, ipc.WithSchema(c.ArrowSchema()))...)).must(t)
		require.NoError(t, w.Write(r))
		require.NoError(t, w.Write(r))
		require.NoError(t, w.Close())
		return buf.Bytes()
	}
	decode := func(data []byte) (int, error) {
		recs, err := decodeIPC(memory.DefaultAllocator, data, c, "generation")
		releaseAll(recs)
		return len(recs), err
	}
	n := call(decode(write(rec))).must(t)
	require.Equal(t, 2, n)

	// Every 8-byte word of the bodies that could be an uncompressed length claims 100 GiB.
	compressed := write(rec, ipc.WithZstd())
	for _, b := range ipcBlocks(t, compressed) {
		off := int(binary.LittleEndian.Uint64(compressed[b:]))
		start := off + int(binary.LittleEndian.Uint32(compressed[b+8:]))
		for i := start; i+8 <= start+int(binary.LittleEndian.Uint64(compressed[b+16:])); i += 8 {
			if v := binary.LittleEndian.Uint64(compressed[i:]); v > 0 && v < 1<<20 {
				binary.LittleEndian.PutUint64(compressed[i:], 100<<30)
			}
		}
	}
	// A key-value list on each batch, its count set to 2^30.
	meta := array.NewRecordBatchWithMetadata(c.ArrowSchema(), rec.Columns(), rec.NumRows(), arrow.NewMetadata([]string{"k"}, []string{"v"}))
	defer meta.Release()
	listed := write(meta)
	for _, b := range ipcBlocks(t, listed) {
		m := listed[binary.LittleEndian.Uint64(listed[b:])+8:][:binary.LittleEndian.Uint32(listed[b+8:])-8]
		r := newFBReader(m)
		binary.LittleEndian.PutUint32(m[r.ref(r.slot(r.ref(0), 12)):], 1<<30)
		require.NoError(t, r.err)
	}
	// The second block a copy of the first.
	twice := write(rec)
	blocks := ipcBlocks(t, twice)
	copy(twice[blocks[1]:blocks[1]+24], twice[blocks[0]:blocks[0]+24])

	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"compressed, uncompressed lengths of 100 GiB", compressed, "compressed"},
		{"key-value count 2^30", listed, "beyond its"},
		{"one batch listed twice", twice, "block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(tc.data)
			require.ErrorIs(t, err, ErrCorrupt)
			require.Regexp(t, tc.want, err.Error())
		})
	}
}
