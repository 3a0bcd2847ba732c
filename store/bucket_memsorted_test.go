package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The sorted mem:// index across many block splits and merges: random inserts and deletes
// against a reference set, every listing and directory listing checked.
func TestSortedMemBackendManyKeys(t *testing.T) {
	ctx := context.Background()
	m := openSortedMemBackend(fmt.Sprintf("mem://sorted-test-%s?index=sorted", t.Name()))
	ref := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		k := fmt.Sprintf("d%02d/k%06d", rng.IntN(40), rng.IntN(50000))
		if rng.IntN(4) == 0 {
			if err := m.delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(ref, k)
			continue
		}
		if err := m.put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		ref[k] = true
	}
	// Plain files at the top level, more than one page of them, before the directories.
	for i := 0; i < 1500; i++ {
		k := fmt.Sprintf("a%05d", i)
		if err := m.putIfAbsent(ctx, k, nil); err != nil {
			t.Fatal(err)
		}
		ref[k] = true
	}
	var want []string
	dirs := map[string]bool{}
	for k := range ref {
		want = append(want, k)
		if k[0] == 'd' {
			dirs[k[:3]] = true
		}
	}
	slices.Sort(want)
	var got []string
	if err := m.list(ctx, "", func(o ObjectInfo) error { got = append(got, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("list: %d keys, want %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
	var sub []string
	if err := m.list(ctx, "d07/", func(o ObjectInfo) error { sub = append(sub, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	var wantSub []string
	for _, k := range want {
		if len(k) > 4 && k[:4] == "d07/" {
			wantSub = append(wantSub, k)
		}
	}
	if !slices.Equal(sub, wantSub) {
		t.Fatalf("list d07/: %d keys, want %d", len(sub), len(wantSub))
	}
	var gotDirs []string
	if err := m.listDirs(ctx, "", func(d string) error { gotDirs = append(gotDirs, d); return nil }); err != nil {
		t.Fatal(err)
	}
	var wantDirs []string
	for d := range dirs {
		wantDirs = append(wantDirs, d)
	}
	slices.Sort(wantDirs)
	if !slices.Equal(gotDirs, wantDirs) {
		t.Fatalf("listDirs: %v, want %v", gotDirs, wantDirs)
	}
	for _, b := range m.blocks {
		if len(b) == 0 || len(b) > sortedBlockMax {
			t.Fatalf("block of %d keys", len(b))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
