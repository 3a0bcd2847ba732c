package s3test

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestBoltObjectsOutliveLaterWrites pins the s3bolt workaround (boltcopy.go): an object that
// GetObject returned still reads back whole after later writes have reused bbolt's pages.
// Over gofakes3's s3bolt backend alone this test fails: the body changes under the reader, or
// reading it faults on memory bbolt has remapped.
func TestBoltObjectsOutliveLaterWrites(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "s3.bolt"), 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := newBoltBackend(db)
	if err := b.CreateBucket("b"); err != nil {
		t.Fatal(err)
	}
	put := func(fill byte) {
		data := bytes.Repeat([]byte{fill}, 64<<10)
		if _, err := b.PutObject("b", "k", nil, bytes.NewReader(data), int64(len(data)), nil); err != nil {
			t.Fatal(err)
		}
	}
	put('a')
	obj, err := b.GetObject("b", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, fill := range []byte("bcdefghij") {
		put(fill)
	}
	got, err := io.ReadAll(obj.Contents)
	if err != nil {
		t.Fatal(err)
	}
	if want := bytes.Repeat([]byte{'a'}, 64<<10); !bytes.Equal(got, want) {
		t.Fatalf("the object read before the writes changed after them: %q… (%d bytes), want %d bytes of 'a'", got[:min(len(got), 16)], len(got), len(want))
	}
}
