package bench

import (
	"context"
	"time"
)

// hostileWorker is one worker child of the hostile scenario (its address and knobs in its
// ready line) with a client to it.
type hostileWorker struct {
	child  *workerChild
	client *hostileClient
	sz     hostileSizes
	o      Options
	// killed is set when a guard killed the child; every later phase is skipped.
	killed bool
}

// startHostileWorker starts a worker child on storage url with knobs set over the defaults.
func startHostileWorker(ctx context.Context, o Options, sz hostileSizes, url, instance string, knobs map[string]string) (*hostileWorker, error) {
	ch, err := startWorkerChild(ctx, o, "hostile", workerChildParams{URL: url, Instance: instance, Knobs: knobs})
	if err != nil {
		return nil, err
	}
	return &hostileWorker{child: ch, client: newHostileClient(ch.ready.Addr), sz: sz, o: o}, nil
}

func (w *hostileWorker) stop() {
	w.client.close()
	w.child.stop()
}

// hostileCase is one measured phase: the worker's answers to the requests and its peak RSS
// while it answered them.
type hostileCase struct {
	Key, Name, Request string
	Answers            []answer
	// Note is what the phase observed beyond the answers, Counts the same as numbers
	// (reported as values "<key>_<name>").
	Note   string
	Counts map[string]float64
	rssSpan
	Killed, Skipped   bool
	Elapsed           time.Duration
	OK, Refused, Gone int
}

// phase measures f: it resets the child's peak RSS, runs f within the case timeout under the
// RSS guard, and reads the peak (the one the guard saw when it killed the child).
func (w *hostileWorker) phase(ctx context.Context, key, name, request string, f func(ctx context.Context) ([]answer, string, map[string]float64)) hostileCase {
	c := hostileCase{Key: key, Name: name, Request: request}
	if w.killed || w.child.exited() {
		c.Skipped = true
		c.Note = "skipped: the worker was killed by the RSS guard in an earlier phase"
		return c
	}
	c.Before = w.child.resetPeak()
	endGuard := guardRSS(w.child, w.sz.rssGuard)
	cctx, cancel := context.WithTimeout(ctx, w.sz.caseTimeout)
	start := time.Now()
	c.Answers, c.Note, c.Counts = f(cctx)
	c.Elapsed = time.Since(start)
	cancel()
	if peakAtKill := endGuard(); peakAtKill > 0 {
		c.Killed, c.Peak, w.killed = true, peakAtKill, true
	} else {
		c.Peak = w.child.peak()
	}
	for _, a := range c.Answers {
		switch {
		case a.ok():
			c.OK++
		case a.Status > 0:
			c.Refused++
		default:
			c.Gone++
		}
	}
	w.o.progressf("hostile: %s: %s; peak RSS %.0f MiB (before %.0f MiB)%s in %s", name, answers(c.Answers), mib(c.Peak), mib(c.Before),
		map[bool]string{true: ", KILLED by the RSS guard", false: ""}[c.Killed], fmtDur(c.Elapsed))
	return c
}

// rssGuardPoll is how often the guard reads the child's RSS; at a few GiB/s of growth the
// child overshoots the limit by tens of MiB at most.
const rssGuardPoll = 10 * time.Millisecond

// guardRSS kills c once its RSS passes limit (the machine's memory is shared); end stops the guard
// and returns the peak RSS it killed at (0 = none).
func guardRSS(c *workerChild, limit int64) (end func() int64) {
	var peakAtKill int64
	stop := poll(rssGuardPoll, func() {
		if peakAtKill == 0 && c.rss() > limit {
			peakAtKill = max(c.peak(), c.rss())
			c.kill()
		}
	})
	return func() int64 { stop(); return peakAtKill }
}
