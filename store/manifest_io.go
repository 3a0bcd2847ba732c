package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Manifest I/O: the put-if-absent version chains on the bucket and the Store's loads and
// publishes of its base and shard manifests. The model and its pure functions are package
// manifest; decoding with the reader's checks is manifest_decode.go.

// chain is a put-if-absent chain of versioned JSON objects under prefix (<v %020d>.json)
// whose live versions are one contiguous range, since n+1 is published only after n and
// collection goes in ascending order; latest() probes forward from a cached hint, one failed
// GET and one existence check of the hint when nothing changed.
type chain struct {
	db     *DB
	prefix string
	// full marks the refusal of a version past the manifest limit: what grew it is pending
	// generations in a shard chain (ErrTooManyPending, which an append's caller may retry
	// once merges catch up) and runs in the base chain (ErrInvalidInput, compact first).
	full error

	mu      sync.Mutex
	hint    uint64
	hintRaw []byte
	// hintObj is version hint decoded, reused while the storage read says it is the latest.
	//
	// INVARIANT: hintObj is shared by every caller that gets it; nobody mutates it.
	hintObj any
}

// versions lists the chain's version numbers, ascending, skipping foreign keys.
func (c *chain) versions(ctx context.Context) ([]uint64, error) {
	return listOwn(ctx, c.db, c.prefix, foreignManifests, parseVersionKey)
}

// latest returns the newest version number and its bytes; (0, nil, nil) when the chain is empty.
func (c *chain) latest(ctx context.Context) (uint64, []byte, error) {
	c.mu.Lock()
	v, raw := c.hint, c.hintRaw
	c.mu.Unlock()
	var err error
	if v == 0 {
		if v, raw, err = c.listLatest(ctx); err != nil {
			return 0, nil, err
		}
	}
	for steps := 0; ; steps++ {
		if steps == 8 {
			// Far behind: one List finds the latest instead of one Get per version.
			lv, lraw, err := c.listLatest(ctx)
			if err != nil {
				return 0, nil, err
			}
			if lv > v {
				v, raw = lv, lraw
			}
		}
		next, err := c.get(ctx, v+1)
		if err == nil {
			v, raw = v+1, next
			c.advance(v, raw, nil) // a failure later in the walk does not start it over
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			return 0, nil, err
		}
		if v > 0 {
			// v+1 is absent. If v itself is gone, collection passed our hint: relist.
			ok, err := c.db.bucket.Exists(ctx, c.prefix+versionName(v))
			if err != nil {
				return 0, nil, err
			}
			if !ok {
				lv, lraw, err := c.listLatest(ctx)
				if err != nil {
					return 0, nil, err
				}
				if lv == v {
					return 0, nil, corruptf("version chain %s: version %d vanished", c.prefix, v)
				}
				v, raw = lv, lraw
				continue
			}
		}
		break
	}
	if v > 0 && raw == nil {
		if raw, err = c.get(ctx, v); err != nil {
			return 0, nil, err
		}
	}
	c.advance(v, raw, nil)
	return v, raw, nil
}

// latestDecoded is latest with the version decoded once per handle, not once per read (the
// storage read is still made: it is what tells a reader, or the WAL's fence check, that
// nothing newer exists). decode's value must never be mutated. (0, nil, nil) when empty.
func (c *chain) latestDecoded(ctx context.Context, decode func(v uint64, raw []byte) (any, error)) (uint64, any, error) {
	v, raw, err := c.latest(ctx)
	if err != nil || v == 0 {
		return 0, nil, err
	}
	c.mu.Lock()
	obj := c.hintObj
	if c.hint != v {
		obj = nil
	}
	c.mu.Unlock()
	if obj != nil {
		return v, obj, nil
	}
	if obj, err = decode(v, raw); err != nil {
		return 0, nil, err
	}
	c.mu.Lock()
	if c.hint == v && c.hintObj == nil {
		c.hintObj = obj
	}
	c.mu.Unlock()
	return v, obj, nil
}

// cached is the version this handle read or published last, decoded, without I/O (nil: none).
func (c *chain) cached() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hintObj
}

// listLatest lists the chain and returns its latest version and bytes (0, nil, nil: empty).
// The latest is the highest version whose predecessor is listed too, else the lowest: a
// handle that knows a version finds the next one by probing v+1, so a version above a gap
// (a stray copy under a far higher number) is one no probe ever reaches, and a handle that
// took it from a listing would read and publish another chain than every other handle.
// Collection keeps 256 versions behind the latest, so the real latest always has its
// predecessor once the chain holds two. The versions above the gap are counted as foreign.
func (c *chain) listLatest(ctx context.Context) (uint64, []byte, error) {
	vs, err := c.versions(ctx)
	if err != nil {
		return 0, nil, err
	}
	if len(vs) == 0 {
		return 0, nil, nil
	}
	best := chainTop(vs)
	for _, v := range vs {
		if v > best {
			c.db.foreignObject(foreignManifests, c.prefix+versionName(v))
		}
	}
	raw, err := c.get(ctx, best)
	if errors.Is(err, ErrNotFound) {
		// Collected between list and get: a newer version exists; the caller probes on.
		return best, nil, nil
	}
	return best, raw, err
}

// chainTop is the latest of the listed versions vs (ascending, not empty): the highest one
// whose predecessor is listed, else the lowest. Pure.
func chainTop(vs []uint64) uint64 {
	for i := len(vs) - 1; i > 0; i-- {
		if vs[i-1]+1 == vs[i] {
			return vs[i]
		}
	}
	return vs[0]
}

// publish writes version v and makes it the cached latest with obj (nil: none) as its decoded
// value, so the publisher never decodes its own version, then collects old versions every 64
// (collectEvery). ErrAlreadyExists: lost the race.
//
// REQUIRES: obj is what raw decodes to, and nobody mutates it afterwards.
func (c *chain) publish(ctx context.Context, v uint64, raw []byte, obj any) error {
	if err := c.put(ctx, v, raw); err != nil {
		return err
	}
	c.advance(v, raw, obj)
	c.collectEvery(ctx, v)
	return nil
}

// get reads version v, refusing one longer than the manifest limit as ErrCorrupt.
func (c *chain) get(ctx context.Context, v uint64) ([]byte, error) {
	return c.db.getSmall(ctx, c.prefix+versionName(v), c.db.manifestLimit(), "manifest version")
}

// put is the durable half of publish, leaving the cache alone (publishBaseThenSwap).
func (c *chain) put(ctx context.Context, v uint64, raw []byte) error {
	if limit := c.db.manifestLimit(); int64(len(raw)) > limit {
		return fmt.Errorf("manifest version %s%s would be %d bytes, more than the %d a reader reads; compact the base or merge the shard's pending generations first: %w",
			c.prefix, versionName(v), len(raw), limit, c.full)
	}
	return c.db.bucket.PutIfAbsent(ctx, c.prefix+versionName(v), raw)
}

// advance is the in-memory half of publish: v (already durable) becomes the cached latest
// unless a newer one already is; O(1) under chain.mu. REQUIRES: as for publish.
func (c *chain) advance(v uint64, raw []byte, obj any) {
	c.mu.Lock()
	if v > c.hint {
		c.hint, c.hintRaw, c.hintObj = v, raw, obj
	}
	c.mu.Unlock()
}

// collectEvery starts the background collection of old versions every 64 versions.
func (c *chain) collectEvery(ctx context.Context, v uint64) {
	if v%64 == 0 {
		go c.collect(context.WithoutCancel(ctx), v, 256)
	}
}

// collect deletes versions older than keep behind latest, oldest first (best effort).
func (c *chain) collect(ctx context.Context, latest uint64, keep uint64) {
	defer c.db.recoverPanic("manifest collection", nil)
	if latest <= keep {
		return
	}
	vs, err := c.versions(ctx)
	if err != nil {
		return
	}
	for _, v := range vs { // ascending
		if v+keep >= latest {
			break
		}
		if err := c.db.bucket.Delete(ctx, c.prefix+versionName(v)); err != nil {
			return
		}
	}
}

func (s *Store) shardChain(shard string) *chain {
	s.shardsMu.Lock()
	defer s.shardsMu.Unlock()
	c, ok := s.shards[shard]
	if !ok {
		c = &chain{db: s.db, prefix: shardManifestPrefix(s.target, shard), full: ErrTooManyPending}
		s.shards[shard] = c
	}
	return c
}

// loadBase returns the latest base manifest (version 0 = empty table), shared with the
// handle's cache: callers draft a new version with next, never by changing it.
func (s *Store) loadBase(ctx context.Context) (*manifest.Base, error) {
	v, obj, err := s.base.latestDecoded(ctx, func(v uint64, raw []byte) (any, error) {
		return decodeBaseManifest(raw, v, s.target)
	})
	if err != nil {
		return nil, err
	}
	if v == 0 {
		return manifest.EmptyBase(), nil
	}
	return obj.(*manifest.Base), nil
}

// publishBase publishes next as version next.Version (ErrAlreadyExists: lost the race),
// taking no lock; merges and quarantines use publishBaseThenSwap instead.
func (s *Store) publishBase(ctx context.Context, next *manifest.Base) error {
	raw, err := s.encodeBase(next)
	if err != nil {
		return err
	}
	return s.base.publish(ctx, next.Version, raw, nil)
}

// encodeBase stamps and serialises next, so callers can do the CPU work before a lock.
func (s *Store) encodeBase(next *manifest.Base) ([]byte, error) {
	next.CreatedAt = s.db.opts.Now().UTC()
	return manifest.EncodeBase(next)
}

// loadShard returns the latest manifest of shard (nil: never wrote), decoded only for a
// version this handle has not seen; the result is shared with the handle's cache.
func (s *Store) loadShard(ctx context.Context, shard string) (*manifest.Shard, error) {
	v, obj, err := s.shardChain(shard).latestDecoded(ctx, func(v uint64, raw []byte) (any, error) {
		return decodeShardManifest(raw, v, s.target, shard)
	})
	if err != nil || v == 0 {
		return nil, err
	}
	return obj.(*manifest.Shard), nil
}

// publishShard publishes next as version next.Version (ErrAlreadyExists: lost the race) and
// keeps it as the cached decode, so a seal never decodes what it wrote.
//
// REQUIRES: the caller does not change next after this call.
func (s *Store) publishShard(ctx context.Context, next *manifest.Shard) error {
	next.UpdatedAt = s.db.opts.Now().UTC()
	raw, err := manifest.EncodeShard(next)
	if err != nil {
		return err
	}
	return s.shardChain(next.Shard).publish(ctx, next.Version, raw, next)
}

// editShard applies edit to the latest manifest of shard and publishes the result,
// re-applying on every lost race (edit false: nothing to publish). Edits must be relative,
// never absolute, so a seal landing in between is never lost; the resident writer adopts
// the result.
func (s *Store) editShard(ctx context.Context, shard string, edit func(m *manifest.Shard) (bool, error)) (*manifest.Shard, error) {
	for attempt := 0; attempt < 64; attempt++ {
		cur, err := s.loadShard(ctx, shard)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("shard %s of %s: %w", shard, s.target, ErrNotFound)
		}
		next := cur.Next()
		ok, err := edit(next)
		if err != nil {
			return nil, err
		}
		if !ok {
			next = cur
		} else if err := s.publishShard(ctx, next); err != nil {
			if !errors.Is(err, ErrAlreadyExists) {
				return nil, err
			}
			backoff(ctx, attempt)
			continue
		}
		if w := s.residentWriter(); w != nil && w.shard == shard {
			w.observe(next)
		}
		return next, nil
	}
	return nil, fmt.Errorf("shard %s of %s: manifest edit kept losing races: %w", shard, s.target, ErrConflict)
}

// listShards lists the shard ids that ever wrote to this store; other directories are foreign.
func (s *Store) listShards(ctx context.Context) ([]string, error) {
	dirs, err := s.db.bucket.ListDirs(ctx, memWALPrefix(s.target))
	if err != nil {
		return nil, err
	}
	out := dirs[:0]
	for _, d := range dirs {
		if IsShardID(d) {
			out = append(out, d)
		} else {
			s.db.foreignObject(foreignShards, memWALPrefix(s.target)+d+"/")
		}
	}
	return out, nil
}
