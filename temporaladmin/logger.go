package temporaladmin

import (
	"fmt"

	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// newSDKLogger bridges a zap logger to the Temporal SDK's log.Logger, so SDK and
// workflow/activity logs (workflow.GetLogger, activity.GetLogger) end up in the same stream
// with the same encoding. The adapter implements log.WithLogger and log.WithSkipCallers, so
// log.With(logger, "target", t) and the SDK's caller skipping both work. A nil logger yields
// a no-op logger.
func newSDKLogger(z *zap.Logger) sdklog.Logger {
	if z == nil {
		z = zap.NewNop()
	}
	// One frame for the adapter method itself.
	return &temporalLogger{z: z.WithOptions(zap.AddCallerSkip(1))}
}

type temporalLogger struct{ z *zap.Logger }

var (
	_ sdklog.Logger          = (*temporalLogger)(nil)
	_ sdklog.WithLogger      = (*temporalLogger)(nil)
	_ sdklog.WithSkipCallers = (*temporalLogger)(nil)
)

func (l *temporalLogger) Debug(msg string, keyvals ...any) {
	if ce := l.z.Check(zapcore.DebugLevel, msg); ce != nil {
		ce.Write(sdkKeyvalsToZap(keyvals)...)
	}
}

func (l *temporalLogger) Info(msg string, keyvals ...any) {
	if ce := l.z.Check(zapcore.InfoLevel, msg); ce != nil {
		ce.Write(sdkKeyvalsToZap(keyvals)...)
	}
}

func (l *temporalLogger) Warn(msg string, keyvals ...any) {
	if ce := l.z.Check(zapcore.WarnLevel, msg); ce != nil {
		ce.Write(sdkKeyvalsToZap(keyvals)...)
	}
}

func (l *temporalLogger) Error(msg string, keyvals ...any) {
	if ce := l.z.Check(zapcore.ErrorLevel, msg); ce != nil {
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
	if len(keyvals) == 0 {
		return nil
	}
	fields := make([]zap.Field, 0, (len(keyvals)+1)/2)
	for i := 0; i < len(keyvals); i += 2 {
		var key string
		switch k := keyvals[i].(type) {
		case string:
			key = k
		case fmt.Stringer:
			key = k.String()
		default:
			key = fmt.Sprint(k)
		}
		if i+1 >= len(keyvals) {
			fields = append(fields, zap.String(key, "(MISSING)"))
			break
		}
		v := keyvals[i+1]
		if err, ok := v.(error); ok {
			fields = append(fields, zap.NamedError(key, err))
			continue
		}
		fields = append(fields, zap.Any(key, v))
	}
	return fields
}
