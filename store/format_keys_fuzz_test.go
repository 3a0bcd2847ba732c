package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Fuzz targets for what a listing and the WAL replay parse out of a storage root that others
// can write to: a key is either recognised in exactly the form format.go writes it, or
// foreign, and no key or object makes a parser panic. Run one briefly with e.g.
//
//	go test -run '^$' -fuzz '^FuzzKeyParsers$' -fuzztime 20s ./store/

var fuzzTarget = Target{Kind: KindGeneric, Name: "fz"}

func FuzzKeyParsers(f *testing.F) {
	shard := ShardID("w1")
	for _, k := range []string{
		versionsPrefix(fuzzTarget) + versionName(7),
		walKey(fuzzTarget, shard, 12),
		genKey(fuzzTarget, shard, 3, 2),
		registryKey(fuzzTarget),
		demandKey(fuzzTarget, shard, 4, time.Unix(1700000000, 0), 123),
		demandCompactMarker(fuzzTarget),
		walPrefix(fuzzTarget, shard) + "18446744073709551615.arrow",
		versionsPrefix(fuzzTarget) + "09223372036854775808.json",
		genPrefix(fuzzTarget, shard) + "00000000000000000001-01.arrow",
		registryDir + "/generic/.DS_Store",
		registryDir + "/generic/a/b.json",
		demandShardPrefix(fuzzTarget, shard) + "00000000000000000001-+1-1",
		dataKey(fuzzTarget, stagedRunID(stagedRunPrefix("a", fuzzTarget, shard), shard, 1, 2)),
	} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if v, ok := parseVersionKey(versionsPrefix(fuzzTarget), key); ok {
			require.Equal(t, versionsPrefix(fuzzTarget)+versionName(v), key)
			require.True(t, v >= 1 && v <= maxCounter)
		}
		if p, ok := parseWALKey(walPrefix(fuzzTarget, shard), key); ok {
			require.Equal(t, walKey(fuzzTarget, shard, p), key)
			require.True(t, p >= 1 && p <= maxCounter)
		}
		if name, ok := strings.CutPrefix(key, genPrefix(fuzzTarget, shard)); ok {
			if g, e, ok := parseGenKey("", name); ok {
				require.Equal(t, genKey(fuzzTarget, shard, g, e), key)
				require.True(t, g <= maxCounter && e <= maxCounter)
			}
		}
		if name, ok := parseRegistryKey(KindGeneric, key); ok {
			require.Equal(t, registryKey(Target{Kind: KindGeneric, Name: name}), key)
		}
		if r, ok := ParseDemandKey(key); ok {
			if r.Compact {
				require.Equal(t, demandCompactMarker(r.Target), key)
			} else {
				require.Equal(t, demandKey(r.Target, r.Shard, r.Gen, r.SealedAt, r.Bytes), key)
				require.True(t, r.Gen <= maxCounter && r.Bytes >= 0)
			}
		}
		if tag, from, through, ok := parseStagedRunKey(fuzzTarget, key); ok {
			hash := strings.TrimPrefix(key, strings.TrimSuffix(dataKey(fuzzTarget, stagedRunNamePrefix), ".parquet"))[:24]
			require.Equal(t, dataKey(fuzzTarget, fmt.Sprintf("%s%s-%s-%d-%d", stagedRunNamePrefix, hash, tag, from, through)), key)
			require.True(t, 1 <= from && from <= through && through <= maxCounter)
			if tag == runIDShardTag(shard) { // what dropLeakedStaged takes for its own run
				require.NotContains(t, strings.TrimPrefix(key, dataPrefix(fuzzTarget)), "/")
			}
		}
		if IsShardID(key) {
			require.True(t, key == ShardID("") || len(key) == 36)
		}
	})
}

// FuzzUnframeWAL: any bytes as a WAL object. Only a framed object whose checksum matches
// yields IPC bytes (exactly what follows the header); everything else is ErrCorrupt.
func FuzzUnframeWAL(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("ARROW1\x00\x00"))
	f.Add(frameWAL([]byte("ARROW1\x00\x00ARROW1")))
	f.Add([]byte(walFrameMagic))
	f.Add(append([]byte(walFrameMagic), 0, 0, 0))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ipc, err := unframeWAL(raw, "wal fuzz")
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, raw, frameWAL(ipc), "accepted bytes are a frame of what they return")
		require.True(t, bytes.HasPrefix(raw, []byte(walFrameMagic)))
	})
}

// FuzzRegistryListing: any foreign keys under _registry/generic/ beside real entries. Every
// page size walks exactly the real stores, in order, and ends.
func FuzzRegistryListing(f *testing.F) {
	f.Add(".DS_Store\nREADME.txt\na/b\nm.json.bak", uint8(1))
	f.Add("a/b.json\n..json\nzz.JSON\n-x.json", uint8(2))
	f.Add("0\n00\n000.txt", uint8(0))
	f.Fuzz(func(t *testing.T, names string, limit uint8) {
		ctx := context.Background()
		db := openTestDB(t, fmt.Sprintf("mem://fuzz-registry-%d", testURLSeq.Add(1)), "w1")
		t.Cleanup(func() {
			dropMemBucket(db.bucket.URL())
		})
		stores := []string{"a", "m", "z"}
		for _, n := range stores {
			raw := []byte(`{"kind":"generic","name":"` + n + `"}`)
			require.NoError(t, db.bucket.Put(ctx, registryKey(Target{Kind: KindGeneric, Name: n}), raw))
		}
		for _, n := range strings.Split(names, "\n") {
			key := registryDir + "/generic/" + n
			if _, ours := parseRegistryKey(KindGeneric, key); ours || objstore.CheckKey(key) != nil {
				continue
			}
			if err := db.bucket.Put(ctx, key, []byte("x")); err != nil {
				// A key that is a "directory" of another (or the reverse) cannot exist on
				// every backend; the bucket refuses it, which is not what this fuzzes.
				if errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrAlreadyExists) {
					continue
				}
				t.Fatal(err)
			}
		}
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(stores)+1 {
				t.Fatalf("listing does not end: %v", got)
			}
			page := call(db.ListStores(ctx, KindGeneric, after, int(limit%4)+1)).must(t)
			for _, s := range page.Stores {
				got = append(got, s.Name)
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		require.Equal(t, stores, got)
	})
}
