package bench

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/worker"
)

// hostileChildParams configure the hostile scenario's worker child.
type hostileChildParams struct {
	URL      string `json:"url"`
	Instance string `json:"instance"`
	// Knobs are flag values set by name on top of the defaults.
	Knobs map[string]string `json:"knobs"`
}

// hostileChildReady is the child's ready line.
type hostileChildReady struct {
	Ready bool   `json:"ready"`
	Addr  string `json:"addr"`
	hostileKnobs
}

// hostileChild is the child half: one worker without Temporal, configured through the same
// flag table as `walkeeper worker`, until stdin closes.
func hostileChild(ctx context.Context, _ Options) error {
	var p hostileChildParams
	if err := childParams("hostile", &p); err != nil {
		return err
	}
	cfg := worker.DefaultConfig()
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	set := map[string]string{"instance": p.Instance, "storage": p.URL, "listen": "127.0.0.1:0"}
	maps.Copy(set, p.Knobs)
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := fs.Set(k, set[k]); err != nil {
			return fmt.Errorf("hostile child: --%s=%s: %w", k, set[k], err)
		}
	}
	ready := hostileChildReady{Ready: true, hostileKnobs: hostileKnobs{Values: map[string]string{}}}
	for _, k := range hostileReportedKnobs {
		ready.Values[k] = fs.Lookup(k).Value.String()
	}
	// Warnings and errors go to stderr, which the parent keeps the tail of for its errors.
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(os.Stderr), zapcore.WarnLevel))
	return runChildWorker(ctx, cfg, logger, nil, func(w *worker.Worker) any {
		ready.Addr = w.HTTPAddr()
		return ready
	})
}
