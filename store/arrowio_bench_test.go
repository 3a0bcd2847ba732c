package store

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// benchObjects returns a generation (Arrow IPC file) and a base run (Parquet) of rows rows of
// testSchema, as seal and a merge write them.
func benchObjects(b *testing.B, c *rowcodec.Codec, rows int) (gen, run []byte) {
	b.Helper()
	rs := make([]Row, rows)
	seqs := make([]int64, rows)
	for i := range rs {
		rs[i] = keyRow(fmt.Sprintf("k%08d", i), int64(i), fmt.Sprintf("value %d", i))
		seqs[i] = 1_700_000_000_000_000_000 + int64(i)
	}
	rec, err := c.Build(memory.DefaultAllocator, rs, seqs, "bench-shard", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Release()
	if gen, err = encodeIPC(c.ArrowSchema(), rec); err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	rec.Retain()
	sent := false
	if err := writeParquet(&buf, c.ArrowSchema(), func() (arrow.RecordBatch, error) {
		if sent {
			return nil, nil
		}
		sent = true
		return rec, nil
	}); err != nil {
		b.Fatal(err)
	}
	return gen, buf.Bytes()
}

// BenchmarkDecodeObject measures what a reader pays per object before any row is used:
// decoding a whole generation (a one-row one is a WAL object's size) and opening a base run
// (footer and schema only), and the schema checks alone that both begin with.
func BenchmarkDecodeObject(b *testing.B) {
	c, err := rowcodec.NewCodec(KindGeneric, testSchema)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, rows := range []int{1, 1000} {
		gen, run := benchObjects(b, c, rows)
		b.Run(fmt.Sprintf("generation/rows=%d", rows), func(b *testing.B) {
			b.SetBytes(int64(len(gen)))
			for i := 0; i < b.N; i++ {
				recs, err := decodeIPC(memory.DefaultAllocator, gen, c, "bench")
				if err != nil {
					b.Fatal(err)
				}
				releaseAll(recs)
			}
		})
		b.Run(fmt.Sprintf("run-open/rows=%d", rows), func(b *testing.B) {
			b.SetBytes(int64(len(run)))
			for i := 0; i < b.N; i++ {
				rb, err := openRunBatches(ctx, memory.DefaultAllocator, run, c, "bench")
				if err != nil {
					b.Fatal(err)
				}
				rb.close()
			}
		})
	}
	gen, run := benchObjects(b, c, 1)
	b.Run("check/generation", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := checkIPCFile(gen, c.ArrowSchema()); err != nil {
				b.Fatal(err)
			}
		}
	})
	rb, err := openRunBatches(ctx, memory.DefaultAllocator, run, c, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer rb.close()
	kv := rb.pf.MetaData().KeyValueMetadata()
	b.Run("check/run", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := checkStoredArrowSchema(kv, c.ArrowSchema()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
