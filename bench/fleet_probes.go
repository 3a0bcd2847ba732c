package bench

import (
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap/zapcore"
)

// allocSampler records the process's cumulative heap allocation every period, to look up the bytes
// allocated up to a moment known only later (the end of discovery): unlike RSS next to a mem://
// fleet, it does not depend on the GC's pacing.
type allocSampler struct {
	mu      sync.Mutex
	start   uint64
	samples []allocSample // REQUIRES: mu
	stop    func()        // ends the sampling
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

// allocatedBy returns the bytes allocated up to the first sample at or after until.
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

// grpcMaxMessage is gRPC's default message limit, which Temporal's frontend keeps.
const grpcMaxMessage = 4 << 20

// payloadWarnings records the largest PayloadSize of the SDK's TMPRL1103 warnings: the only trace
// of a result that gRPC then refuses.
type payloadWarnings struct{ largest atomic.Int64 }

func (p *payloadWarnings) wrap(c zapcore.Core) zapcore.Core { return &payloadCore{Core: c, p: p} }

// integerFields are the field types that carry their value in Field.Integer as a number.
var integerFields = []zapcore.FieldType{zapcore.Int64Type, zapcore.Int32Type, zapcore.Int16Type, zapcore.Int8Type,
	zapcore.Uint64Type, zapcore.Uint32Type, zapcore.Uint16Type, zapcore.Uint8Type}

type payloadCore struct {
	zapcore.Core
	p *payloadWarnings
}

func (c *payloadCore) With(fs []zapcore.Field) zapcore.Core {
	return &payloadCore{Core: c.Core.With(fs), p: c.p}
}

func (c *payloadCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.Contains(e.Message, "TMPRL1103") {
		ce = ce.AddCore(e, c)
	}
	return c.Core.Check(e, ce)
}

func (c *payloadCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	if !strings.Contains(e.Message, "TMPRL1103") {
		return c.Core.Write(e, fs)
	}
	for _, f := range fs {
		if f.Key == "PayloadSize" && slices.Contains(integerFields, f.Type) {
			raiseTo(&c.p.largest, f.Integer)
		}
	}
	return nil
}
