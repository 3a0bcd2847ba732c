package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Damaged objects this process has met, each counted once in walkeeper_corrupt_objects_total;
// a damaged WAL object keeps its shard's claims from publishing an epoch per retried append.

// damagedMax bounds the keys remembered; the oldest is forgotten, and counted again if met.
const damagedMax = 1024

// keySet is a set of at most limit keys, the oldest forgotten first: the damaged objects
// met, the base runs too large for the cache. Safe for concurrent use.
type keySet struct {
	limit int
	mu    sync.Mutex
	keys  map[string]struct{}
	order []string // oldest first
}

// add remembers key and reports whether it was new.
func (d *keySet) add(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.keys[key]; ok {
		return false
	}
	if d.keys == nil {
		d.keys = map[string]struct{}{}
	}
	if len(d.order) > 0 && len(d.order) >= d.limit {
		delete(d.keys, d.order[0])
		d.order = slices.Delete(d.order, 0, 1)
	}
	d.keys[key] = struct{}{}
	d.order = append(d.order, key)
	return true
}

// has reports whether key is remembered.
func (d *keySet) has(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.keys[key]
	return ok
}

// remove forgets key: it was repaired, set aside or released.
func (d *keySet) remove(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.keys[key]; !ok {
		return
	}
	delete(d.keys, key)
	d.order = slices.DeleteFunc(d.order, func(k string) bool { return k == key })
}

// clear forgets every key.
func (d *keySet) clear() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.keys, d.order = nil, nil
}

// under returns the remembered keys that start with prefix.
func (d *keySet) under(prefix string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, k := range d.order {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// countCorrupt counts an ErrCorrupt of key in walkeeper_corrupt_objects_total, once per object.
func (s *Store) countCorrupt(key string, err error) {
	if errors.Is(err, ErrCorrupt) && s.db.damaged.add(key) {
		s.db.metrics.CorruptObjects.WithLabelValues(string(s.target.Kind)).Inc()
	}
}

// stillDamagedWAL returns the ErrCorrupt of a WAL object of shard an earlier claim here could
// not replay, while it is still damaged and to be replayed, so a client retrying appends does
// not publish a manifest version per request. It writes nothing.
func (s *Store) stillDamagedWAL(ctx context.Context, shard string) error {
	prefix := walPrefix(s.target, shard)
	keys := s.db.damaged.under(prefix)
	if len(keys) == 0 {
		return nil
	}
	cur, err := s.loadShard(ctx, shard)
	if err != nil {
		return err
	}
	for _, key := range keys {
		pos, ok := parseWALKey(prefix, key)
		if ok && cur != nil {
			_, q := findQuarantined(cur.Quarantined, key)
			ok = !q && pos > cur.ReplayAfter // set aside, or sealed: no claim replays it
		}
		if ok {
			recs, err := s.readWAL(ctx, shard, pos)
			if err == nil {
				releaseAll(recs)
			} else if errors.Is(err, ErrCorrupt) || !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		s.db.damaged.remove(key)
	}
	return nil
}

// readWAL reads and decodes the WAL object at pos of shard, checking its length and header
// first.
func (s *Store) readWAL(ctx context.Context, shard string, pos uint64) (_ []arrow.RecordBatch, err error) {
	key := walKey(s.target, shard, pos)
	defer func() { s.countCorrupt(key, err) }()
	what := fmt.Sprintf("WAL %s/%s/%d", s.target, shard, pos)
	data, err := s.db.getSmall(ctx, key, s.db.walReadLimit(), what)
	if err != nil {
		return nil, err
	}
	what += " (" + key + ")"
	if data, err = unframeWAL(data, what); err != nil {
		return nil, err
	}
	return decodeIPC(memory.DefaultAllocator, data, s.codec, what)
}
