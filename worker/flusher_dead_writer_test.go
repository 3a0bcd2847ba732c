package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// An eviction whose final seal fails keeps its store resident with the dead writer, whose
// acknowledged rows are in the WAL only: with no idle eviction and the store count under the
// max, only the flush sweeper's next pass, which claims the shard, replays the WAL and seals
// them, lets another process read them before the next append or explicit flush.
func TestFindingFlusherSealsTheRowsOfADeadWriter(t *testing.T) {
	ctx := context.Background()
	raw, err := objstore.OpenBucket(ctx, fmt.Sprintf("mem://flush-dead-%d", time.Now().UnixNano()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	var s *store.Store
	var step atomic.Int32 // 0: off; 1: waits for the first seal's publish; 2: fails the final seal's generation
	b := raw.WithFaults(objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		switch {
		case op == objstore.OpPutIfAbsent && strings.Contains(key, "/manifest/") && err == nil && step.CompareAndSwap(1, 2):
			appendIDs(t, s, "late") // acknowledged after the eviction's first seal froze its rows
		case op == objstore.OpPut && strings.Contains(key, "/gen/") && step.Load() == 2:
			return errors.New("injected: the final seal's generation write fails")
		}
		return err
	}})
	now := time.Now() // a clock that stands still: the late append does not make the store recent again
	open := func(b *objstore.Bucket, instance string, max int) *store.DB {
		opts := store.DefaultOptions()
		opts.InstanceID = instance
		opts.Logger = zaptest.NewLogger(t)
		opts.ResidentStoresMax, opts.ResidentIdle = max, 0
		opts.Now = func() time.Time { return now }
		db := store.OpenDBOnBucket(b, opts)
		t.Cleanup(func() { _ = db.Close(context.Background()) })
		return db
	}
	db := open(b, "w", 1)
	sch := store.Schema{Fields: []store.Field{{Name: "id", Type: "string"}}}
	create := func(name string) *store.Store {
		s, err := db.Create(ctx, store.Target{Kind: store.KindGeneric, Name: name}, store.CreateOptions{Schema: &sch})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s = create("dead")
	appendIDs(t, s, "a")
	step.Store(1)
	create("other") // over the max: evicts "dead", whose final seal fails
	if step.Load() != 2 {
		t.Fatal("the late append did not run inside the eviction")
	}
	step.Store(0)
	if s.HasWriter() {
		t.Fatal("the failed eviction left a live writer")
	}
	// No Open follows and no idle eviction runs: only the sweeper may seal "late".

	testFlusher(t, FlusherOptions{Resident: db.Resident}).FlushOnce(ctx)

	reader, err := open(raw, "r", 0).Open(ctx, s.Target())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "late"} {
		if _, err := reader.Get(ctx, id); err != nil {
			t.Fatalf("another process reads %q: %v", id, err)
		}
	}
}
