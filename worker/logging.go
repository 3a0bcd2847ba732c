package worker

import (
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Log formats accepted by NewLogger.
const (
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

// NewLogger builds a logger writing JSON lines (default) or console text to w, at level
// debug|info|warn|error (default info).
func NewLogger(w io.Writer, format, level string) (*zap.Logger, error) {
	var lvl zapcore.Level // zap reads "" as info
	if err := lvl.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	var cfg zapcore.EncoderConfig
	newEncoder := zapcore.NewJSONEncoder
	switch strings.ToLower(format) {
	case "", LogFormatJSON:
		cfg = zap.NewProductionEncoderConfig()
		cfg.TimeKey = "ts"
		cfg.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	case LogFormatConsole:
		cfg = zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		newEncoder = zapcore.NewConsoleEncoder
	default:
		return nil, fmt.Errorf("log format %q: want json or console", format)
	}
	cfg.EncodeDuration = zapcore.StringDurationEncoder
	core := zapcore.NewCore(newEncoder(cfg), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)), nil
}
