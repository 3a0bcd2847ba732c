package bench

import (
	"runtime/metrics"
	"sync"
	"time"
)

// allocSampler records the process's cumulative heap allocation every period, to look up the bytes
// allocated up to a moment known only later (the end of discovery): unlike RSS next to a mem://
// fleet, it does not depend on the GC's pacing.
type allocSampler struct {
	mu      sync.Mutex
	start   uint64
	samples []allocSample // REQUIRES: mu
	// stop ends the sampling.
	stop func()
}

type allocSample struct {
	at    time.Time
	bytes uint64
}

func readAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func startAllocSampler(period time.Duration) *allocSampler {
	a := &allocSampler{start: readAllocs()}
	a.stop = poll(period, func() {
		at, v := time.Now(), readAllocs()
		a.mu.Lock()
		a.samples = append(a.samples, allocSample{at, v})
		a.mu.Unlock()
	})
	return a
}

// allocatedBy returns the bytes allocated since the start up to the first sample at or
// after until (the last sample if none is).
func (a *allocSampler) allocatedBy(until time.Time) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	last := a.start
	for _, s := range a.samples {
		last = s.bytes
		if !s.at.Before(until) {
			break
		}
	}
	return int64(last - a.start)
}
