package temporaladmin

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestSDKLoggerBridge(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	var l sdklog.Logger = newSDKLogger(zap.New(core, zap.AddCaller()))

	l.Info("started", "target", "generic:gs", "pending", 3)
	sdklog.With(l, "workflow_id", "merge-wal/generic/gs").Warn("slow", "err", errors.New("boom"), "dangling")
	l.(sdklog.WithSkipCallers).WithCallerSkip(1).Error("bad", 42, "non-string key")
	l.Debug("dbg")

	entries := logs.All()
	require.Len(t, entries, 4)
	assert.Equal(t, zapcore.InfoLevel, entries[0].Level)
	assert.Equal(t, "logger_test.go", filepath.Base(entries[0].Caller.File), "the caller is the SDK's call site, not the bridge")
	assert.Equal(t, map[string]any{"target": "generic:gs", "pending": int64(3)}, entries[0].ContextMap())
	assert.Equal(t, zapcore.WarnLevel, entries[1].Level)
	m := entries[1].ContextMap()
	assert.Equal(t, "merge-wal/generic/gs", m["workflow_id"])
	assert.Equal(t, "boom", m["err"])
	assert.Equal(t, "(MISSING)", m["dangling"])
	assert.Equal(t, "non-string key", entries[2].ContextMap()["42"])
	assert.Equal(t, zapcore.DebugLevel, entries[3].Level)

	// A nil zap logger is a no-op, not a panic.
	newSDKLogger(nil).Info("nothing")
}
