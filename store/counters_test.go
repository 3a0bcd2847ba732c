package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Counters that grow by one (versions, WAL positions, generations, epochs, watermarks) are
// refused above maxCounter wherever they are parsed, so incrementing one never wraps.

func TestCountersOutOfRangeAreRefused(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://counters-%d", testURLSeq.Add(1))
	_, s, _ := mergedStore(t, url)
	shard := s.db.Shard()

	for _, field := range []string{"replay_after", "next_generation", "writer_epoch"} {
		next := call(s.loadShard(ctx, shard)).must(t).Next()
		switch field {
		case "replay_after":
			next.ReplayAfter = 1<<64 - 1
		case "next_generation":
			next.NextGeneration = maxCounter + 1
		case "writer_epoch":
			next.WriterEpoch = 1<<64 - 1
		}
		raw := call(manifest.EncodeShard(next)).must(t)
		require.ErrorIs(t, errOf(decodeShardManifest(raw, next.Version, s.target, shard)), ErrCorrupt, field)
	}

	next := call(s.loadBase(ctx)).must(t).Next("test")
	next.Watermarks[shard] = 1<<64 - 1
	raw := call(manifest.EncodeBase(next)).must(t)
	require.ErrorIs(t, errOf(decodeBaseManifest(raw, next.Version, s.target)), ErrCorrupt)

	// A prepared merge that would publish such a watermark is refused before it writes.
	p := call(s.Prepare(ctx, PrepareParams{AttemptKey: "wf/r"})).must(t)
	bad := *p
	bad.Generations = []uint64{1<<64 - 1}
	bad.Through = 1<<64 - 1
	require.ErrorIs(t, errOf(commitOne(ctx, s, &bad)), ErrInvalidInput)
	noSum := *p
	noSum.Staged = []StagedFile{p.Staged[0]}
	noSum.Staged[0].Checksum = ""
	require.ErrorIs(t, errOf(commitOne(ctx, s, &noSum)), ErrInvalidInput)
	call(commitOne(ctx, s, p)).must(t)
}
