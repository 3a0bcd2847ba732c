package bench

import (
	"slices"
	"strings"
	"sync/atomic"

	"go.uber.org/zap/zapcore"
)

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
