package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Manifest I/O: the put-if-absent version chains on the bucket and the Store's loads and
// publishes of its base and shard manifests. The model and its pure functions are in
// manifest.go.

// chain is a put-if-absent chain of versioned JSON objects under prefix (<v %020d>.json).
// Version n+1 exists only if version n existed when it was published, and garbage
// collection deletes versions in ascending order, so the live versions are always one
// contiguous range [low, latest]. latest() probes forward from a cached hint instead of
// listing, which keeps the per-read cost at one failed GET when nothing changed.
type chain struct {
	b      *Bucket
	prefix string

	mu      sync.Mutex
	hint    uint64
	hintRaw []byte
}

func newChain(b *Bucket, prefix string) *chain { return &chain{b: b, prefix: prefix} }

// latest returns the newest version number and its bytes; (0, nil, nil) when the chain is empty.
func (c *chain) latest(ctx context.Context) (uint64, []byte, error) {
	c.mu.Lock()
	v, raw := c.hint, c.hintRaw
	c.mu.Unlock()
	if v == 0 {
		lv, lraw, err := c.listLatest(ctx)
		if err != nil {
			return 0, nil, err
		}
		v, raw = lv, lraw
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
		next, err := c.b.Get(ctx, c.prefix+versionName(v+1))
		if err == nil {
			v, raw = v+1, next
			// Remember progress, so a failure later in the walk does not start it over.
			c.mu.Lock()
			if v > c.hint {
				c.hint, c.hintRaw = v, raw
			}
			c.mu.Unlock()
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			return 0, nil, err
		}
		if v > 0 {
			// v+1 is absent. If v itself is gone, collection passed our hint: relist.
			ok, err := c.b.Exists(ctx, c.prefix+versionName(v))
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
		got, err := c.b.Get(ctx, c.prefix+versionName(v))
		if err != nil {
			return 0, nil, err
		}
		raw = got
	}
	c.mu.Lock()
	if v >= c.hint {
		c.hint, c.hintRaw = v, raw
	}
	c.mu.Unlock()
	return v, raw, nil
}

func (c *chain) listLatest(ctx context.Context) (uint64, []byte, error) {
	objs, err := c.b.List(ctx, c.prefix)
	if err != nil {
		return 0, nil, err
	}
	var best uint64
	for _, o := range objs {
		if v, ok := parseVersionName(o.Key); ok && v > best {
			best = v
		}
	}
	if best == 0 {
		return 0, nil, nil
	}
	raw, err := c.b.Get(ctx, c.prefix+versionName(best))
	if errors.Is(err, ErrNotFound) {
		// Collected between list and get: a newer version exists; the caller probes on.
		return best, nil, nil
	}
	return best, raw, err
}

// publish writes version v and makes it the cached latest. ErrAlreadyExists means another
// writer published v first.
func (c *chain) publish(ctx context.Context, v uint64, raw []byte) error {
	if err := c.put(ctx, v, raw); err != nil {
		return err
	}
	c.advance(v, raw)
	return nil
}

// put is the durable half of publish: the put-if-absent of version v, leaving the cache
// alone. The base chain's committers call it outside any lock and advance under it
// (publishBaseThenSwap).
func (c *chain) put(ctx context.Context, v uint64, raw []byte) error {
	return c.b.PutIfAbsent(ctx, c.prefix+versionName(v), raw)
}

// advance is the in-memory half of publish: version v (already durable) becomes the cached
// latest unless a newer one already is. O(1); takes only chain.mu.
func (c *chain) advance(v uint64, raw []byte) {
	c.mu.Lock()
	if v > c.hint {
		c.hint, c.hintRaw = v, raw
	}
	c.mu.Unlock()
}

// collect deletes versions older than keep behind latest, oldest first (best effort).
func (c *chain) collect(ctx context.Context, latest uint64, keep uint64) {
	if latest <= keep {
		return
	}
	objs, err := c.b.List(ctx, c.prefix)
	if err != nil {
		return
	}
	for _, o := range objs { // List is sorted, so deletion is ascending.
		v, ok := parseVersionName(o.Key)
		if !ok || v+keep >= latest {
			continue
		}
		if err := c.b.Delete(ctx, o.Key); err != nil {
			return
		}
	}
}

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
		return emptyBase(), nil
	}
	return decodeBaseManifest(raw, v, s.target)
}

// publishBase publishes next as version next.Version. ErrAlreadyExists = lost the race.
// It takes no lock: compaction calls it holding mergeLock; merges and quarantines publish
// with publishBaseThenSwap instead, which takes the lock only for the in-memory swap.
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
	s.collectBase(ctx, v)
	return nil
}

// collectBase starts the background collection of old base versions every 64 versions.
func (s *Store) collectBase(ctx context.Context, v uint64) {
	if v%64 == 0 {
		go s.base.collect(context.WithoutCancel(ctx), v, 256)
	}
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
	return decodeShardManifest(raw, v, s.target, shard)
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
