package bench

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// registerFleet writes n stores' registry entry and store.json straight into the bucket, the
// template store's bytes renamed: 1M stores take seconds, and no DB holds them resident.
func registerFleet(ctx context.Context, b *objstore.Bucket, prefix string, n int) error {
	const tmplName = "fleet-template-name"
	tdb, err := store.OpenDB(ctx, memURL("fleet-template"), storeOptions("fleet-template", nil))
	if err != nil {
		return err
	}
	t := store.Target{Kind: fleetKind, Name: tmplName}
	if _, err := createGeneric(ctx, tdb, tmplName); err != nil {
		return err
	}
	tb := tdb.Bucket()
	reg, err := tb.Get(ctx, "_registry/"+string(fleetKind)+"/"+tmplName+".json")
	if err != nil {
		return err
	}
	meta, err := tb.Get(ctx, t.Path()+"/store.json")
	if err != nil {
		return err
	}
	_ = tdb.Close(ctx)
	quoted := []byte(`"` + tmplName + `"`)
	if bytes.Count(reg, quoted) != 1 || bytes.Count(meta, quoted) != 1 {
		return fmt.Errorf("template store's objects name it %d and %d times, want once each", bytes.Count(reg, quoted), bytes.Count(meta, quoted))
	}
	const chunk = 10_000
	// 16 chunks at once: file:// (fleet-worker) waits on the file system, not the CPU.
	return eachN(16, (n+chunk-1)/chunk, func(c int) error {
		for i := c * chunk; i < min((c+1)*chunk, n); i++ {
			name := fleetName(prefix, i)
			q := []byte(`"` + name + `"`)
			if err := b.Put(ctx, "_registry/"+string(fleetKind)+"/"+name+".json", bytes.Replace(reg, quoted, q, 1)); err != nil {
				return err
			}
			if err := b.Put(ctx, string(fleetKind)+"/"+name+"/store.json", bytes.Replace(meta, quoted, q, 1)); err != nil {
				return err
			}
		}
		return nil
	})
}

// fleetSizes is o.FleetSizes, or full (2k and 20k with Quick), each in [least, 10M].
func fleetSizes(o Options, scenario string, full []int, least int) ([]int, error) {
	sizes := o.FleetSizes
	if len(sizes) == 0 {
		sizes = fullOrQuick(o, full, []int{2_000, 20_000})
	}
	for _, n := range sizes {
		if n < least || n > 10_000_000 {
			return nil, fmt.Errorf("%s: size %d out of range [%d, 10000000]", scenario, n, least)
		}
	}
	return sizes, nil
}

func fleetName(prefix string, i int) string { return fmt.Sprintf("%s%07d", prefix, i) }

func debtOf(n int) int { return max(n/100, 1) }

// plantDebt seals generations in debt of the n stores, spread evenly, through two writers closed
// afterwards: fleetOldGens sealed an hour ago in the even ones, fleetHotGens fresh in the odd ones.
func plantDebt(ctx context.Context, url, prefix string, n, debt int, o Options) (map[store.Target]time.Time, int, error) {
	old, err := store.OpenDB(ctx, url, storeOptions(prefix+"writer-old", o.logger().Named("store"), func(so *store.Options) {
		so.Now = func() time.Time { return time.Now().Add(-time.Hour) }
	}))
	if err != nil {
		return nil, 0, err
	}
	hot, err := store.OpenDB(ctx, url, storeOptions(prefix+"writer-hot", o.logger().Named("store")))
	if err != nil {
		_ = old.Close(ctx)
		return nil, 0, err
	}
	defer func() {
		_ = old.Close(context.WithoutCancel(ctx))
		_ = hot.Close(context.WithoutCancel(ctx))
	}()
	var mu sync.Mutex
	planted := make(map[store.Target]time.Time, debt)
	var gens atomic.Int64
	err = eachN(8, debt, func(j int) error {
		db, k := old, fleetOldGens
		if j%2 == 1 {
			db, k = hot, fleetHotGens
		}
		t := store.Target{Kind: fleetKind, Name: fleetName(prefix, j*(n/debt))}
		st, err := db.Open(ctx, t)
		if err != nil {
			return err
		}
		if err := writeGenerations(ctx, st, k, 1, 64, 1, int64(j)); err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		gens.Add(int64(k))
		mu.Lock()
		planted[t] = time.Now()
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return planted, int(gens.Load()), nil
}
