package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// Objects walkeeper did not write, under every prefix it lists: each listing skips them,
// counts them in walkeeper_foreign_objects_total{place}, and never reads, replays or
// deletes them.

// foreignDB opens a DB on url with metrics and an observed logger whose clock stands still,
// so the foreign-key warnings are rate-limited to exactly one per place.
func foreignDB(t *testing.T, url, instance string) (*DB, *Metrics, *observer.ObservedLogs) {
	t.Helper()
	m := NewMetrics(prometheus.NewRegistry(), nil)
	core, logs := observer.New(zapcore.WarnLevel)
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	db := openTestDB(t, url, instance, func(o *Options) {
		o.Metrics, o.Logger, o.Now = m, zap.New(core), func() time.Time { return now }
	})
	return db, m, logs
}

func foreignCount(m *Metrics, place string) float64 {
	return testutil.ToFloat64(m.ForeignObjects.WithLabelValues(place))
}

// putForeign stores each key with a few bytes that are no walkeeper object.
func putForeign(t *testing.T, db *DB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		require.NoError(t, db.bucket.Put(context.Background(), k, []byte("not walkeeper's: "+k)), k)
	}
}

// requireStillThere checks that no listing deleted a foreign key.
func requireStillThere(t *testing.T, db *DB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		require.True(t, keyExists(t, db, k), "foreign key %s was deleted", k)
	}
}

// pageStores walks every page of ListStores with limit and returns the names in order.
func pageStores(t *testing.T, db *DB, kind Kind, limit int) []string {
	t.Helper()
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 1000, "ListStores does not end")
		page, err := db.ListStores(context.Background(), kind, after, limit)
		require.NoError(t, err, "page after %q", after)
		require.LessOrEqual(t, len(page.Stores), limit)
		for _, s := range page.Stores {
			names = append(names, s.Name)
		}
		if page.Next == "" {
			return names
		}
		require.NoError(t, ValidateName(page.Next), "a cursor is always a store name")
		require.Len(t, page.Stores, limit, "a page that has a next page is full")
		after = page.Next
	}
}

// createTargets creates the stores name(j), j < count(i), of each kinds[i], and returns them
// in the order a listing of kinds pages them.
func createTargets(t *testing.T, db *DB, kinds []Kind, count func(i int) int, name func(j int) string) []Target {
	t.Helper()
	var out []Target
	for i, k := range kinds {
		for j := range count(i) {
			tg := Target{Kind: k, Name: name(j)}
			co := CreateOptions{}
			if k == KindGeneric {
				co.Schema = &testSchema
			}
			require.NoError(t, errOf(db.Create(context.Background(), tg, co)))
			out = append(out, tg)
		}
	}
	return out
}

// listEveryTarget pages through ListTargetsWith(o) from o.After on, checks each page with
// check (full: a next page follows it), and returns every target listed, in order.
func listEveryTarget(t *testing.T, db *DB, o TargetsOptions, check func(page TargetsPage, full bool)) []Target {
	t.Helper()
	var got []Target
	for pages := 0; ; pages++ {
		require.Less(t, pages, 40, "%+v: the listing does not end", o)
		page := call(db.ListTargetsWith(context.Background(), o)).must(t)
		require.NotEmpty(t, page.Stores, "%+v: a next page is given only when a store follows", o)
		for _, s := range page.Stores {
			got = append(got, s.Target)
		}
		full := page.Next != (Target{})
		check(page, full)
		if !full {
			return got
		}
		require.Equal(t, page.Stores[len(page.Stores)-1].Target, page.Next)
		o.After = page.Next
	}
}

func TestRegistryListingSkipsForeignKeys(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, m, logs := foreignDB(t, url, "w1")
			stores := []string{"a", "m", "n", "z"}
			for _, n := range stores {
				createGeneric(t, db, n, false)
			}
			reg := registryDir + "/generic/"
			foreign := []string{
				reg + ".DS_Store", reg + "README.txt", reg + "a/b", reg + "a/b.json", reg + "m.json.bak",
				reg + "zz.JSON", reg + "..json", reg + "~z.json", reg + "-x.json",
			}
			// A run of foreign keys longer than any page, between two stores.
			for i := 0; i < 1100; i++ {
				foreign = append(foreign, fmt.Sprintf("%sm-junk-%04d.txt", reg, i))
			}
			putForeign(t, db, foreign...)

			for _, limit := range []int{1, 2, 3, 1000} {
				require.Equal(t, stores, pageStores(t, db, KindGeneric, limit), "limit %d", limit)
			}
			all := call(db.ListTargets(ctx, []Kind{KindGeneric}, Target{}, MaxListPage)).must(t)
			require.Len(t, all.Stores, len(stores))
			require.Zero(t, all.Next)
			for i, s := range all.Stores {
				require.Equal(t, stores[i], s.Name)
			}
			require.NoError(t, errOf(db.Recover(ctx)), "startup recovery pages the same registry")

			require.GreaterOrEqual(t, foreignCount(m, foreignRegistry), float64(len(foreign)))
			warned := logs.FilterField(zap.String("place", foreignRegistry)).Len()
			require.Equal(t, 1, warned, "one warning a minute per place, however many keys")
			requireStillThere(t, db, foreign...)
		})
	}
}

func TestForeignKeysInsideAStoreAreSkipped(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, m, _ := foreignDB(t, url, "w1")
			s := createGeneric(t, db, "fk", false)
			seal(t, s, row("a", 1), row("b", 2))
			seal(t, s, row("c", 3))
			appendRows(t, s, row("d", 4)) // unsealed: in the WAL only
			shard := db.Shard()
			tgt := s.target
			sp := shardPrefix(tgt, shard)
			attempt := "wf/foreign"
			stem := strings.TrimSuffix(dataKey(tgt, stagedRunPrefix(attempt, tgt, shard)), ".parquet")
			foreign := map[string][]string{
				foreignWAL: {
					sp + "wal/README.txt", sp + "wal/18446744073709551615.arrow", sp + "wal/09223372036854775808.arrow",
					sp + "wal/5.arrow", sp + "wal/00000000000000000000.arrow", sp + "wal/sub/00000000000000000002.arrow",
				},
				foreignGenerations: {sp + "gen/.DS_Store", sp + "gen/00000000000000000001-1.arrow.bak", sp + "gen/1-1.arrow"},
				foreignManifests: {
					versionsPrefix(tgt) + ".DS_Store", versionsPrefix(tgt) + "18446744073709551615.json",
					versionsPrefix(tgt) + "99999999999999999999.json", sp + "manifest/notes.txt",
				},
				foreignShards: {memWALPrefix(tgt) + "junk/x"},
				foreignDemand: {
					demandStorePrefix(tgt) + ".DS_Store", demandShardPrefix(tgt, shard) + "notes",
					demandShardPrefix(tgt, shard) + "18446744073709551615-1-1",
				},
				foreignStaging: {stem + "notes.txt"},
			}
			var all []string
			for _, keys := range foreign {
				all = append(all, keys...)
			}
			putForeign(t, db, all...)

			// A new process of the same instance replays the unsealed WAL past the foreign
			// keys (a position at 2^64-1 would have wrapped the next one to 0).
			db2, m2, _ := foreignDB(t, url, "w1")
			n := call(db2.Recover(ctx)).must(t)
			require.Equal(t, 1, n)
			s2 := openGeneric(t, db2, "fk")
			seal(t, s2, row("e", 5))
			want := map[string]int64{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
			require.Equal(t, want, allRows(t, s2, SourceAll))

			call(commitOne(ctx, s2, call(s2.Prepare(ctx, PrepareParams{AttemptKey: attempt})).must(t))).must(t)
			call(s2.MergeAll(ctx)).must(t)
			call(s2.CompactBase(ctx, CompactParams{})).must(t)
			require.NoError(t, errOf(s2.ReconcileDemand(ctx)))
			var records int
			require.NoError(t, db2.WalkDemand(ctx, KindGeneric, func(DemandRecord) error { records++; return nil }))
			require.Equal(t, want, allRows(t, openGeneric(t, openTestDB(t, url, "r"), "fk"), SourceAll))

			for place := range foreign {
				require.Positive(t, foreignCount(m, place)+foreignCount(m2, place), "place %s", place)
			}
			requireStillThere(t, db2, all...)
		})
	}
}

func TestDemandWalkSkipsForeignKeys(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db, m, _ := foreignDB(t, url, "w1")
			s := createGeneric(t, db, "dw", false)
			sealGenerations(t, s, 3)
			putForeign(t, db, demandDir+"/generic/README", demandDir+"/generic/dw/x/y/z",
				demandDir+"/generic/Bad Name/"+db.Shard()+"/00000000000000000001-1-1")
			var gens []uint64
			require.NoError(t, db.WalkDemand(ctx, KindGeneric, func(r DemandRecord) error {
				gens = append(gens, r.Gen)
				return nil
			}))
			require.Len(t, gens, 3)
			require.Equal(t, float64(3), foreignCount(m, foreignDemand))
		})
	}
}

// ListTargets pages across kinds: each page holds at most limit stores, a page that has a
// next page is full, and the pages together are every store once, kind by kind in the order
// asked, each kind in name order, however the page boundaries fall on the kinds.
func TestListTargetsPagesAcrossKinds(t *testing.T) {
	ctx := context.Background()
	db := openTestDB(t, backends(t)["mem"], "w1")
	kinds := []Kind{KindRollout, KindGeneric, KindDatagen}
	want := createTargets(t, db, kinds, func(i int) int { return 3 + 2*i }, func(j int) string { return fmt.Sprintf("s%02d", j) })
	for _, limit := range []int{1, 2, 3, 4, 5, 8, 14, 15, 1000} {
		got := listEveryTarget(t, db, TargetsOptions{Kinds: kinds, Limit: limit}, func(page TargetsPage, full bool) {
			require.LessOrEqual(t, len(page.Stores), limit)
			if full {
				require.Len(t, page.Stores, limit, "limit %d: a page that has a next page is full", limit)
			}
		})
		require.Equal(t, want, got, "limit %d", limit)
	}
	rg := call(db.ListTargets(ctx, []Kind{KindRollout, KindGeneric}, Target{Kind: KindGeneric, Name: "s03"}, 1)).must(t)
	require.Equal(t, "s04", rg.Stores[0].Name)
	require.Zero(t, rg.Next, "the last store of the last kind asked for: no next page")
	one := call(db.ListTargets(ctx, []Kind{KindGeneric}, Target{Kind: KindGeneric, Name: "s02"}, 1000)).must(t)
	require.Len(t, one.Stores, 2, "after a cursor, only the stores after it")
	require.Equal(t, "s03", one.Stores[0].Name)
}

// ListTargetsWith ends a page with the store whose entry brings the page's JSON text to
// MaxBytes, whatever the limit, so a page holds at most MaxBytes plus one entry; with names of
// mixed lengths across kinds, Next continues right after the last store and the pages together
// are every store once, in order.
func TestListTargetsWithMaxBytes(t *testing.T) {
	db := openTestDB(t, backends(t)["mem"], "w1")
	kinds := []Kind{KindRollout, KindGeneric}
	want := createTargets(t, db, kinds, func(i int) int { return 9 + i }, func(j int) string {
		return fmt.Sprintf("s%02d-%s", j, strings.Repeat("n", (j*37)%128))[:min(128, 4+(j*37)%128)]
	})
	for _, maxBytes := range []int64{1, 200, 500, 1000, 1 << 20} {
		o := TargetsOptions{Kinds: kinds, Limit: MaxListPage, MaxBytes: maxBytes}
		got := listEveryTarget(t, db, o, func(page TargetsPage, full bool) {
			var before int64 // the entries before the last one
			for _, s := range page.Stores[:len(page.Stores)-1] {
				before += s.JSONBytes()
			}
			require.Less(t, before, maxBytes, "max %d: the page goes on past the entry that reached the bound", maxBytes)
			if full {
				require.GreaterOrEqual(t, before+page.Stores[len(page.Stores)-1].JSONBytes(), maxBytes,
					"max %d: a page that has a next page is full", maxBytes)
			}
		})
		require.Equal(t, want, got, "max %d", maxBytes)
	}
}

// StoreInfo.JSONBytes is the length of the entry as listed, and MaxStoreInfoJSONBytes bounds
// the longest entry a registry can hold.
func TestStoreInfoJSONBytes(t *testing.T) {
	name := strings.Repeat("x", 128)
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(23*3600+59*60)))
	info := StoreInfo{Target: Target{Kind: KindDatagen, Name: name}, Kind: KindDatagen, Name: name, CreatedAt: far}
	b := call(json.Marshal(info)).must(t)
	require.Equal(t, int64(len(b)+len(`"target":"datagen:`+name+`",`)), info.JSONBytes())
	require.LessOrEqual(t, info.JSONBytes(), int64(MaxStoreInfoJSONBytes))
	info.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, int64(MaxStoreInfoJSONBytes), info.JSONBytes(), "an entry that does not encode")
}
