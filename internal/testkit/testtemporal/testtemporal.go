// Package testtemporal starts a real Temporal dev server for tests.
//
// Tests never assume a running server: Start finds the Temporal CLI (see
// devserver.FindCLI) or builds it once into <module root>/.cache/bin, then runs
// `temporal server start-dev` headless on free ports with a throw-away database, and stops
// it when the test ends.
package testtemporal

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/internal/devserver"
)

// defaultNamespace is the namespace every dev server has.
const defaultNamespace = "default"

// Options tune Start.
type Options struct {
	// NoSearchAttributes starts a vanilla server without walkeeper's search attributes, for
	// tests of temporaladmin.EnsureSearchAttributes.
	NoSearchAttributes bool
	// ExtraNamespaces are created too (the client is not bound to them).
	ExtraNamespaces []string
	// DynamicConfig sets server settings over walkeeper's tuning (devserver.TunedDynamicConfig,
	// deploy/temporal/dynamicconfig.yaml), e.g. {"matching.enableFairness": false}.
	DynamicConfig map[string]any
}

// SkipShort skips t under -short. Every test that starts a Temporal server (Start, a cluster,
// worker processes) calls it first, so that -short runs none of them, for one reason.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal server; skipped with -short")
	}
}

// Start runs a dev server for t and returns its frontend address and a connected client.
// Both are cleaned up with t.Cleanup. It fails the test if the server cannot start.
//
// WALKEEPER_TEST_TEMPORAL_SERVER=cluster starts a PostgreSQL-backed server instead, and
// WALKEEPER_TEST_TEMPORAL=host:port uses an existing one (see cluster.go).
func Start(t testing.TB) (hostPort string, c client.Client) {
	t.Helper()
	return StartSelected(t, Options{})
}

// StartWithOptions is Start with options, always on a dev server.
func StartWithOptions(t testing.TB, o Options) (hostPort string, c client.Client) {
	t.Helper()
	d, c := startDev(t, o)
	return d.srv.HostPort(), c
}

// devOptions are the dev-server options of a test server for o, its database in dir.
func devOptions(o Options, dir string) devserver.Options {
	opts := devserver.Options{Install: true, DataDir: dir, ScratchDB: true, Headless: true, LogLevel: "error",
		ExtraNamespaces: o.ExtraNamespaces, NoSearchAttributes: o.NoSearchAttributes}
	for _, k := range slices.Sorted(maps.Keys(o.DynamicConfig)) {
		opts.DynamicConfig = append(opts.DynamicConfig, fmt.Sprintf("%s=%v", k, o.DynamicConfig[k]))
	}
	return opts
}

type progressWriter struct{ t testing.TB }

func (w progressWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", p)
	return len(p), nil
}
