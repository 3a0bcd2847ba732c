package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Store is one (kind, name) LSM store: a base table of Parquet runs plus, per shard, a chain
// of manifests listing sealed generations, plus this process's memtable. doc.go has its locks
// and their order.
type Store struct {
	db     *DB
	target Target
	meta   manifest.StoreMeta
	codec  *rowcodec.Codec

	mergeLock sync.RWMutex // orders this process's merge phases: doc.go says who takes it how

	base *chain

	shardsMu sync.Mutex        // guards shards
	shards   map[string]*chain // shard id -> its manifest chain, created on first use

	genSlackOnce sync.Once // computes genSlack (read_object.go)
	genSlack     int64

	writerMu sync.Mutex // guards w, closed and evicted
	w        *writer
	closed   bool
	// pins counts the appends using w (pinnedWriter): an eviction leaves a pinned store
	// resident, since a store being written is not idle. It grows only under writerMu, where
	// the eviction reads it, and an append drops its pin without the lock.
	pins atomic.Int32
	// evicted: the DB dropped this handle (resident.go); its writer accessors forward to the
	// target's resident handle, so a caller still holding it loses nothing.
	evicted bool

	// lastUsed is the unix-nanosecond time of the last Open, write or read (resident.go).
	lastUsed atomic.Int64
	// claimed: an eviction has picked this handle. Guarded by DB.mu.
	claimed bool
}

func newStore(db *DB, t Target, meta manifest.StoreMeta, codec *rowcodec.Codec) *Store {
	s := &Store{
		db:     db,
		target: t,
		meta:   meta,
		codec:  codec,
		base:   &chain{db: db, prefix: versionsPrefix(t), full: ErrInvalidInput},
		shards: map[string]*chain{},
	}
	s.touch()
	return s
}

// Target is the store's "<kind>:<name>".
func (s *Store) Target() Target { return s.target }

// Codec converts rows for this store's schema.
func (s *Store) Codec() *rowcodec.Codec { return s.codec }

// writer returns the resident writer of this process's shard, claiming the shard on first
// use; an evicted handle hands out its target's resident handle's writer.
func (s *Store) writer(ctx context.Context) (*writer, error) {
	w, unpin, err := s.pinnedWriter(ctx)
	if err != nil {
		return nil, err
	}
	unpin()
	return w, nil
}

// pinnedWriter is writer for an append: until unpin, no eviction retires the writer, so an
// append in flight never finds its writer stopped by an eviction of a store it is using.
func (s *Store) pinnedWriter(ctx context.Context) (w *writer, unpin func(), err error) {
	s.touch()
	s.writerMu.Lock()
	if s.evicted {
		s.writerMu.Unlock()
		cur, err := s.db.Open(ctx, s.target)
		if err != nil {
			return nil, nil, err
		}
		return cur.pinnedWriter(ctx)
	}
	defer s.writerMu.Unlock()
	if s.closed {
		return nil, nil, ErrClosed
	}
	if s.w == nil || !s.w.alive() {
		if s.w != nil {
			s.w.stopCommitter() // a dead writer's committer has nothing left to do
		}
		fresh, err := openWriter(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		s.w = fresh
	}
	s.pins.Add(1)
	return s.w, func() { s.pins.Add(-1) }, nil
}

// residentWriter returns the current writer without opening one (an evicted handle: the
// live handle's, DB.liveHandle).
func (s *Store) residentWriter() *writer {
	w, evicted := s.handle()
	if w != nil && w.alive() {
		return w
	}
	if evicted {
		if cur := s.db.liveHandle(s.target); cur != nil && cur != s {
			return cur.residentWriter()
		}
	}
	return nil
}

// handle returns the handle's last writer, alive or not, and whether the DB dropped the handle.
func (s *Store) handle() (*writer, bool) {
	s.writerMu.Lock()
	defer s.writerMu.Unlock()
	return s.w, s.evicted
}

// HasWriter reports whether this process holds a live writer for the store.
func (s *Store) HasWriter() bool { return s.residentWriter() != nil }

// HoldsOrphanedRows reports whether this handle's writer is dead with acknowledged rows in
// the WAL only that no newer claim is known to have replayed; Flush then claims, replays and
// seals them.
func (s *Store) HoldsOrphanedRows() bool {
	w, evicted := s.handle()
	return w != nil && !evicted && w.holdsOrphanedRows()
}

func (s *Store) close(ctx context.Context) error {
	s.writerMu.Lock()
	s.closed = true
	w := s.w
	s.w = nil
	s.writerMu.Unlock()
	if w == nil {
		return nil
	}
	return w.close(ctx)
}

func backoff(ctx context.Context, attempt int) {
	if attempt == 0 {
		return
	}
	d := time.Duration(1<<min(attempt, 8)) * 100 * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// readWriter returns the last writer, alive or not, since a fenced writer holds acknowledged
// rows until a replacement replays them (an evicted handle: DB.liveHandle's).
func (s *Store) readWriter() *writer {
	s.touch()
	w, evicted := s.handle()
	if w == nil && evicted {
		if cur := s.db.liveHandle(s.target); cur != nil && cur != s {
			return cur.readWriter()
		}
	}
	return w
}
