package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.temporal.io/api/serviceerror"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// The count trigger starts MergeWal exactly when the own shard's pending count reaches the
// threshold after a seal, and never when the threshold is 0 (off).
func TestCountTriggerFiresAtThreshold(t *testing.T) {
	for _, tc := range []struct {
		threshold int
		want      []int // pending counts at which a start happens, for seals 1..5
	}{
		{threshold: 3, want: []int{3, 4, 5}},
		{threshold: 1, want: []int{1, 2, 3, 4, 5}},
		{threshold: 0, want: nil},
	} {
		t.Run(fmt.Sprintf("threshold=%d", tc.threshold), func(t *testing.T) {
			m := NewMetrics(nil)
			db, _, ge := testDB(t, m)
			rs := &recStarter{}
			sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: tc.threshold, Start: rs.start, Metrics: m, Resident: db.Resident})
			var got []int
			for i := 1; i <= 5; i++ {
				appendIDs(t, ge, fmt.Sprintf("g%d", i))
				before := rs.count()
				sw.FlushOnce(context.Background())
				if rs.count() > before {
					got = append(got, i)
				}
				if rs.count()-before > 1 {
					t.Fatalf("seal %d started %d workflows", i, rs.count()-before)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("starts after seals %v, want %v", got, tc.want)
			}
			for _, c := range rs.calls {
				if c.target != "generic:fast" || c.in.Target != "generic:fast" {
					t.Fatalf("start call %+v", c)
				}
			}
			// A flush pass that seals nothing does not start again.
			before := rs.count()
			sw.FlushOnce(context.Background())
			if rs.count() != before {
				t.Fatal("an empty flush re-triggered MergeWal")
			}
			if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultStarted)); int(got) != len(tc.want) {
				t.Fatalf("trigger_starts_total{count,started} = %v", got)
			}
		})
	}
}

// Without a starter (HTTP-only mode) the trigger is off whatever the threshold.
func TestCountTriggerOffWithoutTemporal(t *testing.T) {
	db, _, ge := testDB(t, nil)
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Resident: db.Resident})
	appendIDs(t, ge, "g1")
	sw.FlushOnce(context.Background()) // must not panic or block
	if sw.triggers.countEnabled() {
		t.Fatal("trigger enabled without a starter")
	}
}

// A failed start is a trigger failure, not a flush failure, and is retried on the next
// successful flush even when that flush seals nothing.
func TestCountTriggerFailureIsNotAFlushFailure(t *testing.T) {
	m := NewMetrics(nil)
	db, _, ge := testDB(t, m)
	rs := &recStarter{}
	rs.setFail(errors.New("temporal unreachable"))
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: rs.start, Metrics: m, Resident: db.Resident})

	appendIDs(t, ge, "g1")
	sw.FlushOnce(context.Background())
	if rs.count() != 1 {
		t.Fatalf("starts = %d, want 1", rs.count())
	}
	if got := testutil.ToFloat64(m.Store.FlushTotal.WithLabelValues("generic", "failed")); got != 0 {
		t.Fatalf("a merge-start failure was counted as a flush failure (%v)", got)
	}
	if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultFailed)); got != 1 {
		t.Fatalf("trigger_starts_total{count,failed} = %v", got)
	}

	rs.setFail(nil)
	sw.FlushOnce(context.Background()) // seals nothing, but the failed start is retried
	if rs.count() != 2 {
		t.Fatalf("starts = %d, want a retry", rs.count())
	}
	sw.FlushOnce(context.Background()) // nothing sealed, nothing to retry
	if rs.count() != 2 {
		t.Fatalf("starts = %d after a successful retry", rs.count())
	}
}

// A count start refused for good (here the frontend's InvalidArgument) is not tried on every
// flush pass: the store backs off, 30s doubling up to 5m, each refusal still logged and
// counted; a start that goes through ends the backoff. A start that may succeed on retry
// keeps its retry on the next pass (TestCountTriggerFailureIsNotAFlushFailure).
func TestCountTriggerBacksOffAStartRefusedForGood(t *testing.T) {
	m := NewMetrics(nil)
	db, _, ge := testDB(t, m)
	rs := &recStarter{}
	rs.setFail(serviceerror.NewInvalidArgument("workflow id too long"))
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: rs.start, Metrics: m, Resident: db.Resident})
	now := time.Unix(1_000_000, 0)
	sw.triggers.now = func() time.Time { return now }
	passes := func(n int) {
		for range n {
			sw.FlushOnce(context.Background())
		}
	}
	expect := func(starts int) {
		t.Helper()
		if rs.count() != starts {
			t.Fatalf("starts = %d, want %d", rs.count(), starts)
		}
		if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(TriggerCount, ResultFailed)); int(got) != starts {
			t.Fatalf("trigger_starts_total{count,failed} = %v, want every refusal counted (%d)", got, starts)
		}
	}

	appendIDs(t, ge, "g1")
	passes(5) // the first seals and is refused; the next four fall inside the backoff
	expect(1)
	for i, delay := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute} {
		now = now.Add(delay - time.Second)
		passes(3)
		expect(1 + i)
		now = now.Add(time.Second)
		passes(3)
		expect(2 + i)
	}

	rs.setFail(nil)
	now = now.Add(5 * time.Minute)
	passes(1)
	if rs.count() != 8 {
		t.Fatalf("starts = %d after the refusal ended, want 8", rs.count())
	}
	appendIDs(t, ge, "g2")
	passes(1) // a seal at the threshold starts at once again: the backoff ended
	if rs.count() != 9 {
		t.Fatalf("starts = %d, want the next seal to start without backoff", rs.count())
	}
}

// The refusal backoffs remember at most maxRefusedTargets targets; the one whose backoff
// ends first makes room.
func TestRefusedTargetsAreBounded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tg := &mergeTriggers{now: func() time.Time { return now }}
	refused := serviceerror.NewNamespaceNotFound("walkeeper")
	tg.noteRefusalLocked("generic:first", refused)
	tg.noteRefusalLocked("generic:first", refused) // backoff 1m: ends last
	for i := range maxRefusedTargets + 10 {
		now = now.Add(time.Millisecond)
		tg.noteRefusalLocked(fmt.Sprintf("generic:s%05d", i), refused)
	}
	if len(tg.refused) != maxRefusedTargets {
		t.Fatalf("%d targets remembered, want at most %d", len(tg.refused), maxRefusedTargets)
	}
	if _, ok := tg.refused["generic:first"]; !ok {
		t.Fatal("evicted the target whose backoff ends last")
	}
	if _, ok := tg.refused["generic:s00000"]; ok {
		t.Fatal("kept the target whose backoff ends first")
	}
	tg.noteRefusalLocked("generic:first", errors.New("temporal unreachable"))
	if _, ok := tg.refused["generic:first"]; ok {
		t.Fatal("a failure that may succeed on retry kept the backoff")
	}
}

// Count-trigger starts ask for parallel prepares unless the worker is configured serial.
func TestCountTriggerParallelPrepareKnob(t *testing.T) {
	for _, serial := range []bool{false, true} {
		t.Run(fmt.Sprintf("serial=%v", serial), func(t *testing.T) {
			db, _, ge := testDB(t, nil)
			rs := &recStarter{}
			sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: rs.start,
				CountInput: contract.MergeWalInput{ParallelPrepare: !serial}, Resident: db.Resident})
			appendIDs(t, ge, "g1")
			sw.FlushOnce(context.Background())
			if rs.count() != 1 {
				t.Fatalf("starts = %d", rs.count())
			}
			if got := rs.calls[0].in.ParallelPrepare; got == serial {
				t.Fatalf("ParallelPrepare = %v with serial prepares %v", got, serial)
			}
		})
	}
}

// A count start is urgent once the own shard is contract.UrgentPastTriggerFactor times past
// the threshold, routine before; every debt start (appends refused) is urgent.
func TestCountTriggerUrgentFarPastItsThreshold(t *testing.T) {
	db, _, ge := testDB(t, nil)
	rs := &recStarter{}
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: rs.start, Resident: db.Resident})
	var urgent []bool
	for i := 1; i <= contract.UrgentPastTriggerFactor+1; i++ {
		appendIDs(t, ge, fmt.Sprintf("g%d", i))
		before := rs.count()
		sw.FlushOnce(context.Background())
		if rs.count() != before+1 {
			t.Fatalf("seal %d: %d starts", i, rs.count()-before)
		}
		urgent = append(urgent, rs.calls[len(rs.calls)-1].in.Urgent)
	}
	if want := "[false false false true true]"; fmt.Sprint(urgent) != want {
		t.Fatalf("urgent by seal %v, want %v", urgent, want)
	}
	tg := &mergeTriggers{threshold: 50}
	if !tg.urgent(TriggerDebt, 1) || tg.urgent(TriggerHTTP, 1_000_000) {
		t.Fatal("a debt start is urgent, an HTTP start routine")
	}
}

// A trigger that fires once the flusher is stopping (a refused append or a flush of an HTTP
// request still draining) starts nothing: its start would run past Stop's wait, on a
// cancelled context, and count as a failed start.
func TestTriggersFireNothingOnceStopped(t *testing.T) {
	m := NewMetrics(nil)
	rs := &recStarter{}
	sw := testFlusher(t, FlusherOptions{MergeAfterGenerations: 1, Start: rs.start,
		Metrics: m, Resident: func() []*store.Store { return nil }})
	if err := sw.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	tgt := store.Target{Kind: store.KindGeneric, Name: "late"}
	if sw.triggers.fire(TriggerDebt, tgt, 5000, "appends refused") {
		t.Fatal("a trigger fired after Stop")
	}
	if sw.triggers.afterFlush(tgt, store.FlushResult{Sealed: true, Pending: 3}) {
		t.Fatal("the count trigger fired after Stop")
	}
	sw.triggers.wg.Wait()
	if n := rs.count(); n != 0 {
		t.Fatalf("%d starts after Stop", n)
	}
	for _, trig := range []string{TriggerDebt, TriggerCount} {
		for _, res := range []string{ResultStarted, ResultFailed} {
			if got := testutil.ToFloat64(m.triggerStarts.WithLabelValues(trig, res)); got != 0 {
				t.Fatalf("trigger_starts_total{%s,%s} = %v after Stop", trig, res, got)
			}
		}
	}
}
