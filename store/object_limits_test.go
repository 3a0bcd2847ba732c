package store

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// padded is a JSON object of the fields in head plus a string field that takes it to n bytes:
// valid JSON that decodes as head does, since unknown fields are ignored.
func padded(head string, n int) []byte {
	s := strings.TrimSuffix(head, "}") + `,"pad":"`
	return []byte(s + strings.Repeat("x", n-len(s)-2) + `"}`)
}

// A store.json and an attempt claim are read whole; walkeeper writes them small, but one put
// in the bucket by hand could be any size, and every Open of the store (or every claim
// collection of the shard) read all of it into memory. Now one longer than its limit is
// refused as ErrCorrupt after limit+1 bytes.
func TestFindingOversizedStoreMetaAndClaimAreRefused(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://oversized-%d", testURLSeq.Add(1))
	w := openTestDB(t, url, "w")
	s := createGeneric(t, w, "big", false)

	key := s.attemptClaimKey("attempt", "w", 1)
	claim := `{"state":"commit","attempt_key":"attempt","through":1}`
	require.NoError(t, w.bucket.Put(ctx, key, padded(claim, maxClaimBytes)))
	c, err := s.readClaim(ctx, key)
	require.NoError(t, err, "a claim of the limit's size is read")
	require.Equal(t, uint64(1), c.Through)
	require.NoError(t, w.bucket.Put(ctx, key, padded(claim, maxClaimBytes+1)))
	require.ErrorIs(t, errOf(s.readClaim(ctx, key)), ErrCorrupt)

	metaKey := storeMetaKey(s.Target())
	meta := getObject(t, w.bucket, metaKey)
	require.NoError(t, w.bucket.Put(ctx, metaKey, padded(string(meta), maxStoreMetaBytes+1)))
	_, err = openTestDB(t, url, "r").Open(ctx, s.Target())
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "longer than")
	require.NoError(t, w.bucket.Put(ctx, metaKey, padded(string(meta), maxStoreMetaBytes)))
	_, err = openTestDB(t, url, "r2").Open(ctx, s.Target())
	require.NoError(t, err, "a store.json of the limit's size is read")
}

// Open and Create only need to know that a store's registry entry exists: they read none of
// its bytes, so an entry of any size costs nothing.
func TestFindingOpenReadsNoRegistryEntry(t *testing.T) {
	ctx := context.Background()
	url := fmt.Sprintf("mem://registry-read-%d", testURLSeq.Add(1))
	s := createGeneric(t, openTestDB(t, url, "w"), "reg", false)
	r := openTestDB(t, url, "r")
	var reads atomic.Int32
	r.bucket = r.bucket.WithFaults(objstore.FaultFuncs{BeforeFunc: func(op, key string) error {
		if op == objstore.OpGet && strings.HasPrefix(key, registryDir+"/") {
			reads.Add(1)
		}
		return nil
	}})
	require.NoError(t, r.bucket.Put(ctx, registryKey(s.Target()), padded(`{"kind":"generic","name":"reg"}`, 4<<20)))
	require.NoError(t, errOf(r.Open(ctx, s.Target())))
	require.ErrorIs(t, errOf(r.Open(ctx, Target{Kind: KindGeneric, Name: "absent"})), ErrNotFound)
	require.Zero(t, reads.Load(), "registry entries read")
}

// A manifest version is read by every read of the store, and was read whole whatever its
// size: a version padded by hand made every reader hold all of it. Now one longer than the
// manifest limit is refused as ErrCorrupt, and a publisher refuses to write one.
func TestFindingOversizedManifestVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	const limit = 64 << 10
	url := fmt.Sprintf("mem://oversized-manifest-%d", testURLSeq.Add(1))
	lower := func(o *Options) { o.maxManifestBytes = limit }
	w := openTestDB(t, url, "w", lower)
	s := createGeneric(t, w, "big", false)
	call(s.Append(ctx, []Row{{Key: "a", Values: []any{"a", int64(1), "x"}}})).must(t)
	flush(t, s)

	// The next base version, valid JSON one byte over the limit.
	next := versionsPrefix(s.Target()) + versionName(1)
	require.NoError(t, w.bucket.Put(ctx, next, padded(`{"version":1,"runs":[],"watermarks":{}}`, limit+1)))
	r, err := openTestDB(t, url, "r", lower).Open(ctx, s.Target())
	require.NoError(t, err)
	_, err = r.List(ctx, ListOptions{Source: SourceAll, Limit: 10})
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "longer than")

	require.NoError(t, w.bucket.Put(ctx, next, padded(`{"version":1,"runs":[],"watermarks":{}}`, limit)))
	r = call(openTestDB(t, url, "r2", lower).Open(ctx, s.Target())).must(t)
	page, err := r.List(ctx, ListOptions{Source: SourceAll, Limit: 10})
	require.NoError(t, err, "a version of the limit's size is read")
	require.Len(t, page.Rows, 1)

	err = s.shardChain("w").put(ctx, 1000, padded(`{}`, limit+1))
	require.ErrorIs(t, err, ErrTooManyPending, "a shard chain grows with pending generations, which merges shrink")
	require.NotErrorIs(t, err, ErrInvalidInput, "an append that sealed into it was a valid request")
	err = s.base.put(ctx, 1000, padded(`{}`, limit+1))
	require.ErrorIs(t, err, ErrInvalidInput, "a base chain grows with runs, which only a compaction shrinks")
	require.False(t, onStorage(t, w.bucket, shardManifestPrefix(s.Target(), "w")+versionName(1000)), "the oversized version was written")
}
