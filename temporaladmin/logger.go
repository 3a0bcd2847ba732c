package temporaladmin

import (
	"fmt"

	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newSDKLogger bridges a zap logger to the Temporal SDK's log.Logger (with log.With and caller
// skipping), so SDK and workflow logs share one stream; nil yields a no-op logger.
func newSDKLogger(z *zap.Logger) sdklog.Logger {
	if z == nil {
		z = zap.NewNop()
	}
	// Two frames: the level method and log.
	return &temporalLogger{z: z.WithOptions(zap.AddCallerSkip(2))}
}

type temporalLogger struct{ z *zap.Logger }

var (
	_ sdklog.Logger          = (*temporalLogger)(nil)
	_ sdklog.WithLogger      = (*temporalLogger)(nil)
	_ sdklog.WithSkipCallers = (*temporalLogger)(nil)
)

func (l *temporalLogger) Debug(msg string, keyvals ...any) { l.log(zapcore.DebugLevel, msg, keyvals) }
func (l *temporalLogger) Info(msg string, keyvals ...any)  { l.log(zapcore.InfoLevel, msg, keyvals) }
func (l *temporalLogger) Warn(msg string, keyvals ...any)  { l.log(zapcore.WarnLevel, msg, keyvals) }
func (l *temporalLogger) Error(msg string, keyvals ...any) { l.log(zapcore.ErrorLevel, msg, keyvals) }

func (l *temporalLogger) log(lvl zapcore.Level, msg string, keyvals []any) {
	if ce := l.z.Check(lvl, msg); ce != nil {
		ce.Write(sdkKeyvalsToZap(keyvals)...)
	}
}

// With returns a child logger that prepends keyvals to every entry.
func (l *temporalLogger) With(keyvals ...any) sdklog.Logger {
	return &temporalLogger{z: l.z.With(sdkKeyvalsToZap(keyvals)...)}
}

// WithCallerSkip returns a child logger that skips depth more stack frames.
func (l *temporalLogger) WithCallerSkip(depth int) sdklog.Logger {
	return &temporalLogger{z: l.z.WithOptions(zap.AddCallerSkip(depth))}
}

// sdkKeyvalsToZap turns the SDK's alternating key/value list into zap fields. A non-string key is
// formatted; a dangling key gets the value "(MISSING)" rather than being dropped.
func sdkKeyvalsToZap(keyvals []any) []zap.Field {
	fields := make([]zap.Field, 0, (len(keyvals)+1)/2)
	for i := 0; i < len(keyvals); i += 2 {
		key := fmt.Sprint(keyvals[i])
		if i+1 >= len(keyvals) {
			fields = append(fields, zap.String(key, "(MISSING)"))
			break
		}
		fields = append(fields, zap.Any(key, keyvals[i+1]))
	}
	return fields
}
