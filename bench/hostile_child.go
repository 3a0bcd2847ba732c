package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/walkeeper/walkeeper/worker"
)

// hostileChildParams configure the hostile scenario's worker child.
type hostileChildParams struct {
	URL      string `json:"url"`
	Instance string `json:"instance"`
	// Knobs are flag values set by name on top of the defaults; a flag this build does not
	// have is reported as absent rather than failing, so one bench drives old and new builds.
	Knobs map[string]string `json:"knobs"`
}

// hostileChildReady is the child's ready line.
type hostileChildReady struct {
	Ready bool   `json:"ready"`
	Addr  string `json:"addr"`
	hostileKnobs
}

// hostileChild is the child half: one worker without Temporal, configured through the same
// flag table as `walkeeper worker`, run by worker.Run until stdin closes.
func hostileChild(ctx context.Context, o Options) error {
	var p hostileChildParams
	if err := json.Unmarshal([]byte(os.Getenv(HostileChildEnv)), &p); err != nil {
		return fmt.Errorf("hostile child: bad %s: %w", HostileChildEnv, err)
	}
	cfg := worker.DefaultConfig()
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	cfg.RegisterFlags(fs)
	set := map[string]string{"instance": p.Instance, "storage": p.URL, "listen": "127.0.0.1:0"}
	for k, v := range p.Knobs {
		set[k] = v
	}
	ready := hostileChildReady{Ready: true, hostileKnobs: hostileKnobs{Values: map[string]string{}}}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if fs.Lookup(k) == nil {
			ready.Absent = append(ready.Absent, k)
			continue
		}
		if err := fs.Set(k, set[k]); err != nil {
			return fmt.Errorf("hostile child: --%s=%s: %w", k, set[k], err)
		}
	}
	for _, k := range hostileReportedKnobs {
		if f := fs.Lookup(k); f != nil {
			ready.Values[k] = f.Value.String()
		} else if _, asked := set[k]; !asked {
			ready.Absent = append(ready.Absent, k)
		}
	}
	// Warnings and errors go to stderr, which the parent keeps the tail of for its errors.
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(os.Stderr), zapcore.WarnLevel))
	ctx, stop := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	return worker.Run(ctx, cfg, logger, nil, func(w *worker.Worker) {
		ready.Addr = w.HTTPAddr()
		raw, _ := json.Marshal(ready)
		out := o.ChildOut
		if out == nil {
			out = os.Stdout
		}
		fmt.Fprintf(out, "%s\n", raw)
	})
}
