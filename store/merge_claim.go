package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The claim phase of a merge: a put-if-absent claim object records "commit" or "abort" for a
// prepared attempt, so exactly one wins across every process. It takes no lock.

// validatePrepared checks a PreparedMerge that crossed a process boundary before anything
// acts on it: bad input is ErrInvalidInput and writes nothing.
func (s *Store) validatePrepared(p *PreparedMerge) error {
	if p == nil {
		return invalidf("nil prepared merge")
	}
	if p.Target != s.target.String() {
		return invalidf("prepared merge is for %s, not %s", p.Target, s.target)
	}
	if err := validateShardID(p.Shard); err != nil {
		return err
	}
	if len(p.Generations) == 0 || p.Generations[len(p.Generations)-1] != p.Through {
		return invalidf("prepared merge lists no generations or a wrong through")
	}
	if p.Through > maxCounter {
		return invalidf("prepared merge through %d is out of range", p.Through) // a watermark no reader would accept
	}
	for i := 1; i < len(p.Generations); i++ {
		if p.Generations[i] <= p.Generations[i-1] {
			return invalidf("prepared generations are not ascending")
		}
	}
	if p.AttemptKey == "" || len(p.Staged) == 0 {
		return invalidf("prepared merge has no attempt key or no staged files")
	}
	prefix := dataPrefix(s.target)
	for _, f := range p.Staged {
		if !strings.HasPrefix(f.Path, prefix) || strings.Contains(f.Path, "..") || !strings.HasSuffix(f.Path, ".parquet") {
			return invalidf("staged file %q is outside %s", f.Path, prefix)
		}
		if f.Checksum == "" || f.Bytes < 0 || f.Rows < 0 {
			return invalidf("staged file %q has no checksum or a negative size", f.Path) // no reader would accept the run
		}
	}
	return nil
}

// validateRound checks a commit's input before anything acts on it: 1 to MaxRoundShards
// valid prepared merges of distinct shards.
func (s *Store) validateRound(ps []*PreparedMerge) error {
	if len(ps) == 0 || len(ps) > MaxRoundShards {
		return invalidf("a round commits 1 to %d prepared merges, not %d", MaxRoundShards, len(ps))
	}
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		if err := s.validatePrepared(p); err != nil {
			return err
		}
		if seen[p.Shard] {
			return invalidf("shard %s appears twice in one round", p.Shard)
		}
		seen[p.Shard] = true
	}
	return nil
}

// attemptClaimKey is the object key (attempts/<h>.json) of the claim of attempt's merge of
// shard through generation through: an attempt's runs and its claim are named by the same
// range end.
func (s *Store) attemptClaimKey(attempt, shard string, through uint64) string {
	return claimPrefix(s.target, shard) + hashKey(attempt, fmt.Sprint(through)) + ".json"
}

// claimAttempt records state ("commit" or "abort") for attempt's merge of shard through
// generation through and returns the state that holds afterwards, ours or the first caller's.
// A claim gone when read after a lost put-if-absent was dropped by another execution that
// finished, so it claims again rather than fail the shard with a NotFound.
func (s *Store) claimAttempt(ctx context.Context, attempt, shard string, through uint64, state string) (string, error) {
	key := s.attemptClaimKey(attempt, shard, through)
	raw, _ := json.Marshal(manifest.AttemptClaim{State: state, AttemptKey: attempt, Through: through, At: s.db.opts.Now().UTC()})
	for range claimAttempts {
		err := s.db.bucket.PutIfAbsent(ctx, key, raw)
		if err == nil {
			return state, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return "", err
		}
		c, err := s.readClaim(ctx, key)
		if !errors.Is(err, ErrNotFound) {
			return c.State, err
		}
	}
	return "", fmt.Errorf("claim %s of attempt %s: dropped each time it was read: %w", key, attempt, ErrConflict)
}

// claimAttempts bounds the put-if-absent and read rounds of one claim whose winner keeps
// vanishing before it is read.
const claimAttempts = 4

// readClaim reads and decodes the attempt claim at key.
func (s *Store) readClaim(ctx context.Context, key string) (manifest.AttemptClaim, error) {
	var c manifest.AttemptClaim
	raw, err := s.db.getSmall(ctx, key, maxClaimBytes, "attempt claim")
	if err == nil {
		err = decodeJSONObject(raw, &c, "attempt claim")
	}
	return c, err
}

// claimRound claims "commit" for each open merge of a round (validateRound checked them);
// one whose attempt was claimed "abort" first is stale.
func (s *Store) claimRound(ctx context.Context, ps []*PreparedMerge, open []int, res *RoundCommitResult) error {
	return eachShard(ctx, s, "shard step", open, func(ctx context.Context, i int) error {
		state, err := s.claimAttempt(ctx, ps[i].AttemptKey, ps[i].Shard, ps[i].Through, "commit")
		if err != nil {
			return err
		}
		if state != "commit" {
			res.Shards[i].Outcome = RoundStale
			res.Shards[i].Reason = fmt.Sprintf("attempt %s was aborted", ps[i].AttemptKey)
		}
		return nil
	})
}

// dropClaim deletes the attempt's claim once the shard's watermark has reached the attempt's
// first generation, which then answers every commit alone; claims aborted below the
// watermark stay, since they stop a late commit.
func (s *Store) dropClaim(ctx context.Context, p *PreparedMerge) error {
	key := s.attemptClaimKey(p.AttemptKey, p.Shard, p.Through)
	if err := s.db.bucket.Delete(ctx, key); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
