package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"
)

// Store is one (kind, name) LSM store: a base table of Parquet runs plus, per shard, a
// chain of manifests listing sealed generations, plus this process's memtable.
//
// Locking. mergeLock orders merges inside one process: Prepare holds it shared for the
// whole (slow) read-and-stage, Commit holds it exclusively only while it publishes the next
// base manifest. Appends and reads never take it: appends go to the writer, reads are
// snapshot reads over immutable objects (see read.go), so neither ever waits on a merge.
// Across processes every publish is a put-if-absent, so the lock is an optimisation and a
// contract for tests, not what makes commits safe.
type Store struct {
	db     *DB
	target Target
	meta   storeMeta
	codec  *Codec

	mergeLock sync.RWMutex

	base *chain

	shardsMu sync.Mutex
	shards   map[string]*chain

	writerMu sync.Mutex
	w        *writer
	closed   bool
}

func newStore(db *DB, t Target, meta storeMeta, codec *Codec) *Store {
	return &Store{
		db:     db,
		target: t,
		meta:   meta,
		codec:  codec,
		base:   newChain(db.bucket, versionsPrefix(t)),
		shards: map[string]*chain{},
	}
}

// Target is the store's "<kind>:<name>".
func (s *Store) Target() Target { return s.target }

// Codec converts rows for this store's schema.
func (s *Store) Codec() *Codec { return s.codec }

// Schema is the store's declared schema.
func (s *Store) Schema() Schema { return s.meta.Schema }

// SealOnAppend reports the persisted seal mode.
func (s *Store) SealOnAppend() bool { return s.meta.SealOnAppend }

func (s *Store) shardChain(shard string) *chain {
	s.shardsMu.Lock()
	defer s.shardsMu.Unlock()
	c, ok := s.shards[shard]
	if !ok {
		c = newChain(s.db.bucket, shardManifestPrefix(s.target, shard))
		s.shards[shard] = c
	}
	return c
}

// loadBase returns the latest base manifest (version 0 = empty table).
func (s *Store) loadBase(ctx context.Context) (*baseManifest, error) {
	v, raw, err := s.base.latest(ctx)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return &baseManifest{Watermarks: map[string]uint64{}}, nil
	}
	var m baseManifest
	if err := decodeJSONObject(raw, &m, fmt.Sprintf("base manifest %d of %s", v, s.target)); err != nil {
		return nil, err
	}
	if m.Version != v {
		return nil, corruptf("base manifest %s/%d says version %d", s.target, v, m.Version)
	}
	if m.Watermarks == nil {
		m.Watermarks = map[string]uint64{}
	}
	prefix := path.Join(storePrefix(s.target), dataDir) + "/"
	for _, r := range m.Runs {
		if !strings.HasPrefix(r.Path, prefix) || checkKey(r.Path) != nil {
			return nil, corruptf("base manifest %s/%d lists run path %q outside %s", s.target, v, r.Path, prefix)
		}
	}
	return &m, nil
}

// publishBase publishes next as version next.Version. ErrAlreadyExists = lost the race.
func (s *Store) publishBase(ctx context.Context, next *baseManifest) error {
	raw, err := s.encodeBase(next)
	if err != nil {
		return err
	}
	return s.publishEncodedBase(ctx, next.Version, raw)
}

// encodeBase stamps and serialises next, so callers that hold a lock while publishing can
// do the CPU work before taking it.
func (s *Store) encodeBase(next *baseManifest) ([]byte, error) {
	next.CreatedAt = s.db.opts.Now().UTC()
	return json.Marshal(next)
}

// publishEncodedBase publishes raw (from encodeBase) as version v.
func (s *Store) publishEncodedBase(ctx context.Context, v uint64, raw []byte) error {
	if err := s.base.publish(ctx, v, raw); err != nil {
		return err
	}
	if v%64 == 0 {
		go s.base.collect(context.WithoutCancel(ctx), v, 256)
	}
	return nil
}

// loadShard returns the latest manifest of shard, or nil if the shard never wrote.
func (s *Store) loadShard(ctx context.Context, shard string) (*shardManifest, error) {
	v, raw, err := s.shardChain(shard).latest(ctx)
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return nil, nil
	}
	var m shardManifest
	if err := decodeJSONObject(raw, &m, fmt.Sprintf("shard manifest %s/%s/%d", s.target, shard, v)); err != nil {
		return nil, err
	}
	if m.Version != v || m.Shard != shard {
		return nil, corruptf("shard manifest %s/%s/%d names %s/%d", s.target, shard, v, m.Shard, m.Version)
	}
	gp := genPrefix(s.target, shard)
	for _, g := range m.Flushed {
		if !strings.HasPrefix(g.Path, gp) || checkKey(g.Path) != nil {
			return nil, corruptf("shard manifest %s/%s/%d lists generation path %q outside %s", s.target, shard, v, g.Path, gp)
		}
	}
	return &m, nil
}

func (s *Store) publishShard(ctx context.Context, next *shardManifest) error {
	next.UpdatedAt = s.db.opts.Now().UTC()
	raw, err := json.Marshal(next)
	if err != nil {
		return err
	}
	c := s.shardChain(next.Shard)
	if err := c.publish(ctx, next.Version, raw); err != nil {
		return err
	}
	if next.Version%64 == 0 {
		go c.collect(context.WithoutCancel(ctx), next.Version, 256)
	}
	return nil
}

// editShard applies edit to the latest manifest of shard and publishes the result,
// re-reading and re-applying on every lost race. edit returns false to skip publishing.
// Edits must be relative ("remove exactly these generations"), never absolute, so that a
// seal landing between two attempts is never lost.
func (s *Store) editShard(ctx context.Context, shard string, edit func(m *shardManifest) (bool, error)) (*shardManifest, error) {
	for attempt := 0; attempt < 64; attempt++ {
		cur, err := s.loadShard(ctx, shard)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("shard %s of %s: %w", shard, s.target, ErrNotFound)
		}
		next := cur.clone()
		next.Version = cur.Version + 1
		ok, err := edit(next)
		if err != nil {
			return nil, err
		}
		if !ok {
			return cur, nil
		}
		err = s.publishShard(ctx, next)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return nil, err
		}
		backoff(ctx, attempt)
	}
	return nil, fmt.Errorf("shard %s of %s: manifest edit kept losing races: %w", shard, s.target, ErrConflict)
}

// shards lists the shard ids that ever wrote to this store.
func (s *Store) listShards(ctx context.Context) ([]string, error) {
	return s.db.bucket.ListDirs(ctx, memWALPrefix(s.target))
}

// writer returns the resident writer of this process's shard, claiming the shard (and
// replaying its unsealed WAL) on first use.
func (s *Store) writer(ctx context.Context) (*writer, error) {
	s.writerMu.Lock()
	defer s.writerMu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.w != nil && s.w.alive() {
		return s.w, nil
	}
	w, err := openWriter(ctx, s)
	if err != nil {
		return nil, err
	}
	s.w = w
	return w, nil
}

// residentWriter returns the current writer without opening one.
func (s *Store) residentWriter() *writer {
	s.writerMu.Lock()
	defer s.writerMu.Unlock()
	if s.w != nil && s.w.alive() {
		return s.w
	}
	return nil
}

// HasWriter reports whether this process holds a live writer for the store.
func (s *Store) HasWriter() bool { return s.residentWriter() != nil }

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

// readWriter returns the last writer, alive or not: a writer killed by a fence still holds
// acknowledged rows (durable in the WAL) until a replacement has replayed them.
func (s *Store) readWriter() *writer {
	s.writerMu.Lock()
	defer s.writerMu.Unlock()
	return s.w
}
