package store

import (
	"context"
	"errors"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Every object a reader decodes is checked against its manifest entry before a decoder sees
// a byte (checksum.go says why).

// readRunObject reads base run path into a buffer of alloc (nil = the Go heap).
func (s *Store) readRunObject(ctx context.Context, path, sum string, bytes int64, alloc objstore.Alloc) ([]byte, error) {
	what := "run " + path
	data, err := s.readChecked(ctx, path, sum, bytes, what, alloc)
	if err == nil && int64(len(data)) != bytes {
		err = corruptf("%s: %d bytes, manifest says %d", what, len(data), bytes)
		s.countCorrupt(path, err)
		return nil, err
	}
	return data, err
}

// genFileLimit is the largest IPC file a generation whose record holds recBytes can be: the
// record's buffers, the schema twice, and per field the metadata and padding (a record
// batch's header, block entry, magic and alignment within ipcFileOverhead, and a field's node
// and buffer entries, 16 bytes each for up to 3 buffers, and padding within ipcFieldOverhead).
func (s *Store) genFileLimit(recBytes int64) int64 {
	s.genSlackOnce.Do(func() {
		s.genSlack = genFileSlackFallback
		if s.codec == nil {
			return
		}
		schema := s.codec.ArrowSchema()
		if empty, err := encodeIPC(schema); err == nil {
			s.genSlack = int64(len(empty)) + ipcFileOverhead + ipcFieldOverhead*int64(schema.NumFields())
		}
	})
	return max(recBytes, 0) + s.genSlack
}

// genFileSlackFallback is the slack of a store without a codec (never read from).
const genFileSlackFallback = 64 << 10

// readChecked reads path, at most limit bytes, into a buffer of alloc and checks it against sum.
func (s *Store) readChecked(ctx context.Context, path, sum string, limit int64, what string, alloc objstore.Alloc) (_ []byte, err error) {
	defer func() { s.countCorrupt(path, err) }()
	if sum == "" {
		return nil, corruptf("%s: its manifest entry has no checksum", what)
	}
	if limit < 0 {
		return nil, corruptf("%s: manifest declares %d bytes", what, limit)
	}
	data, err := s.db.bucket.GetAtMost(ctx, path, limit, alloc)
	if errors.Is(err, objstore.ErrTooLarge) {
		return nil, corruptf("%s, as its manifest declares: %v", what, err)
	}
	if errors.Is(err, ErrNotFound) {
		return nil, &missingObject{path: path, err: err}
	}
	if err != nil {
		return nil, err
	}
	if got := checksumOf(data); got != sum {
		return nil, corruptf("%s: checksum %s, manifest says %s (%d bytes read)", what, got, sum, len(data))
	}
	return data, nil
}
