package store

import (
	"context"
	"errors"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Collecting abandoned staged runs, which a Prepare whose workflow was stopped leaves under an
// attempt key nobody will abort: the round commit that moves a watermark into their range,
// past which no commit can publish them, collects them (decision 0281).

// collectPerRound bounds the objects each collector deletes in one round commit, so a bucket
// full of leftovers adds a bounded tail to one commit; the next round goes on with the rest.
const collectPerRound = 100

// collectAbandonedStaged deletes at most collectPerRound staged runs of this store that the
// cached base does not reference and whose shard's watermark reaches into their range; the
// common case, nothing to collect, costs one LIST. It returns how many it deleted.
//
// INVARIANT: a run whose range is open, or whose shard tag matches no shard or more than one,
// is never deleted here (only its attempt's abort claim can prove it unpublishable).
func (s *Store) collectAbandonedStaged(ctx context.Context, own []*PreparedMerge) (int, error) {
	base, err := s.collectorBase(ctx)
	if err != nil {
		return 0, err
	}
	prefix := dataPrefix(s.target) + stagedRunNamePrefix
	objs, err := s.db.bucket.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	type candidate struct {
		key, tag      string
		from, through uint64
	}
	mine := map[string]bool{}
	for _, p := range own {
		for _, f := range p.Staged {
			mine[f.Path] = true
		}
	}
	var cands []candidate
	for _, o := range objs {
		if mine[o.Key] || baseKeeps(base, o.Key) {
			continue // live, or set aside by an operator: it stays for repair
		}
		tag, from, through, ok := parseStagedRunKey(s.target, o.Key)
		if !ok {
			s.db.foreignObject(foreignStaging, o.Key) // never deleted: not ours to delete
			continue
		}
		if !coveredByTag(base, tag, from, through) {
			continue // open for every shard it may belong to (the usual in-flight Prepare)
		}
		cands = append(cands, candidate{o.Key, tag, from, through})
	}
	if len(cands) == 0 {
		return 0, nil
	}
	shards, err := s.listShards(ctx)
	if err != nil {
		return 0, err
	}
	owners := map[string][]string{}
	for _, sh := range shards {
		owners[runIDShardTag(sh)] = append(owners[runIDShardTag(sh)], sh)
	}
	deleted := 0
	for _, c := range cands {
		if deleted == collectPerRound {
			break
		}
		if len(owners[c.tag]) != 1 {
			continue
		}
		shard := owners[c.tag][0]
		if manifest.WatermarkCoverage(base.Watermarks[shard], c.from, c.through) == manifest.RangeOpen {
			continue // a commit of its attempt may still publish it
		}
		if err := s.db.bucket.Delete(ctx, c.key); err != nil {
			return deleted, err
		}
		deleted++
	}
	if deleted > 0 {
		s.db.log.Info("abandoned staged runs deleted", zap.String("target", s.target.String()), zap.Int("deleted", deleted))
	}
	return deleted, nil
}

// coveredByTag reports whether the watermark of a shard whose id starts with tag reaches
// into from..through (the shard directory listing then decides whether the tag is unique).
func coveredByTag(base *manifest.Base, tag string, from, through uint64) bool {
	for sh, wm := range base.Watermarks {
		if runIDShardTag(sh) == tag && manifest.WatermarkCoverage(wm, from, through) != manifest.RangeOpen {
			return true
		}
	}
	return false
}

// collectorBase is the version this round just published, as this handle cached it; an older
// base is as safe, since watermarks only grow.
func (s *Store) collectorBase(ctx context.Context) (*manifest.Base, error) {
	if obj := s.base.cached(); obj != nil {
		return obj.(*manifest.Base), nil
	}
	return s.loadBase(ctx)
}

// collectSettledClaims deletes the attempt claims, at most collectPerRound per shard, whose
// last generation the watermark covers, which then answers every late commit or abort alone
// (dropClaim); the abort claims of cancelled merges are otherwise never deleted. It returns
// how many it deleted.
//
// INVARIANT: a claim whose range the watermark does not cover, or a key under attempts/
// walkeeper did not write, is never deleted.
func (s *Store) collectSettledClaims(ctx context.Context, shards []string) (int, error) {
	base, err := s.collectorBase(ctx)
	if err != nil {
		return 0, err
	}
	var deleted atomic.Int64
	err = eachShard(ctx, s, "claim collection", shards, func(ctx context.Context, shard string) error {
		n, err := s.collectShardClaims(ctx, base.Watermarks[shard], shard)
		deleted.Add(int64(n))
		return err
	})
	return int(deleted.Load()), err
}

// collectShardClaims deletes the claims under one shard's attempts/ whose through the
// watermark covers, at most collectPerRound of them.
func (s *Store) collectShardClaims(ctx context.Context, watermark uint64, shard string) (int, error) {
	prefix := claimPrefix(s.target, shard)
	objs, err := s.db.bucket.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for _, o := range objs {
		if deleted == collectPerRound {
			break
		}
		if !isHashName(prefix, o.Key, ".json") { // an attempt claim: attemptClaimKey
			s.db.foreignObject(foreignClaims, o.Key)
			continue
		}
		c, err := s.readClaim(ctx, o.Key) // the bucket's own errors are never ErrCorrupt
		switch {
		case errors.Is(err, ErrNotFound):
			continue // dropped by its own commit or abort meanwhile
		case errors.Is(err, ErrCorrupt) || err == nil && c.Through == 0:
			s.db.foreignObject(foreignClaims, o.Key) // not a claim walkeeper wrote: not ours to judge
			continue
		case err != nil:
			return deleted, err
		}
		if watermark < c.Through {
			continue
		}
		if err := s.db.bucket.Delete(ctx, o.Key); err != nil && !errors.Is(err, ErrNotFound) {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}
