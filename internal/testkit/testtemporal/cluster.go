package testtemporal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// Environment variables that choose which Temporal server the tests run against.
const (
	// EnvServer picks the server tests start: "dev" (default; the CLI's dev server, SQLite,
	// one history shard) or "cluster" (the production server on PostgreSQL with several
	// shards and SQL visibility, package temporalcluster).
	EnvServer = "WALKEEPER_TEST_TEMPORAL_SERVER"
	// EnvHostPort points the tests at an existing server (host:port) instead: none is
	// started. The TLS and API-key variables below and EnvNamespace go with it.
	EnvHostPort  = "WALKEEPER_TEST_TEMPORAL"
	EnvNamespace = "WALKEEPER_TEST_NAMESPACE"
	// TLS for EnvHostPort, as the worker's WALKEEPER_TEMPORAL_TLS* (docs/CONFIG.md).
	EnvTLS           = "WALKEEPER_TEST_TEMPORAL_TLS"
	EnvTLSCert       = "WALKEEPER_TEST_TEMPORAL_TLS_CERT"
	EnvTLSKey        = "WALKEEPER_TEST_TEMPORAL_TLS_KEY"
	EnvTLSCA         = "WALKEEPER_TEST_TEMPORAL_TLS_CA"
	EnvTLSServerName = "WALKEEPER_TEST_TEMPORAL_TLS_SERVER_NAME"
	EnvAPIKey        = "WALKEEPER_TEST_TEMPORAL_API_KEY"
)

// Mode is where a test's Temporal comes from.
type Mode string

const (
	ModeDev      Mode = "dev"      // a dev server started for the test
	ModeCluster  Mode = "cluster"  // a PostgreSQL-backed server started for the test
	ModeExternal Mode = "external" // an existing server named by EnvHostPort
)

// SelectedMode reads EnvHostPort and EnvServer.
func SelectedMode() (Mode, error) {
	if os.Getenv(EnvHostPort) != "" {
		return ModeExternal, nil
	}
	switch m := strings.ToLower(os.Getenv(EnvServer)); m {
	case "", "dev":
		return ModeDev, nil
	case "cluster":
		return ModeCluster, nil
	default:
		return "", fmt.Errorf("%s=%q: want dev or cluster", EnvServer, m)
	}
}

// ExternalConfig is the connection to the server named by EnvHostPort. An empty namespace
// here means the caller's.
func ExternalConfig() temporaladmin.Config {
	cfg := temporaladmin.Config{
		HostPort:      os.Getenv(EnvHostPort),
		Namespace:     os.Getenv(EnvNamespace),
		TLSCert:       os.Getenv(EnvTLSCert),
		TLSKey:        os.Getenv(EnvTLSKey),
		TLSCA:         os.Getenv(EnvTLSCA),
		TLSServerName: os.Getenv(EnvTLSServerName),
		APIKey:        os.Getenv(EnvAPIKey),
	}
	switch strings.ToLower(os.Getenv(EnvTLS)) {
	case "1", "true", "yes", "on":
		cfg.TLS = true
	}
	return cfg
}

// StartCluster runs a PostgreSQL-backed Temporal server for t (package temporalcluster) and
// returns it with a client of its "default" namespace. Everything is stopped by t.Cleanup; on failure the
// server, PostgreSQL and schema logs are kept and their directory is logged.
func StartCluster(t testing.TB, o Options) (*temporalcluster.Cluster, client.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "walkeeper-temporal-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := temporalcluster.Start(ctx, clusterOptions(o, dir, progressWriter{t}))
	if errors.Is(err, cachebin.ErrNotInstalled) {
		_ = os.RemoveAll(dir)
		cachebin.Missing(t, err)
	}
	if err != nil {
		t.Fatalf("testtemporal: start PostgreSQL-backed Temporal (logs in %s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("testtemporal: stop cluster: %v", err)
		}
		if t.Failed() {
			t.Logf("testtemporal: Temporal server, PostgreSQL and schema logs kept in %s", dir)
		} else {
			_ = os.RemoveAll(dir)
		}
	})
	return cl, dial(t, temporaladmin.Config{HostPort: cl.HostPort(), Namespace: defaultNamespace})
}

// clusterOptions are the temporalcluster options of a test server for o, its files in dir.
// DynamicConfig overrides deploy/temporal/dynamicconfig.yaml's keys.
func clusterOptions(o Options, dir string, progress io.Writer) temporalcluster.Options {
	co := temporalcluster.Options{Dir: dir, Namespaces: append([]string{defaultNamespace}, o.ExtraNamespaces...),
		Progress: progress, DynamicConfig: o.DynamicConfig}
	if !o.NoSearchAttributes {
		co.SearchAttributes = contract.SearchAttributes
	}
	return co
}

// StartSelected is Start with options: the server EnvServer/EnvHostPort select (an
// external one ignores o.DynamicConfig), else a dev server (StartWithOptions).
func StartSelected(t testing.TB, o Options) (hostPort string, c client.Client) {
	t.Helper()
	mode, err := SelectedMode()
	if err != nil {
		t.Fatalf("testtemporal: %v", err)
	}
	switch mode {
	case ModeCluster:
		cl, c := StartCluster(t, o)
		return cl.HostPort(), c
	case ModeExternal:
		cfg := ExternalConfig()
		cfg.Namespace = cmp.Or(cfg.Namespace, defaultNamespace)
		c := dial(t, cfg)
		attrs := contract.SearchAttributes
		if o.NoSearchAttributes {
			attrs = nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for _, ns := range append([]string{cfg.Namespace}, o.ExtraNamespaces...) {
			if err := temporalcluster.RegisterNamespace(ctx, c, ns, attrs); err != nil {
				t.Fatalf("testtemporal: %s=%s: %v", EnvHostPort, cfg.HostPort, err)
			}
		}
		return cfg.HostPort, c
	}
	return StartWithOptions(t, o)
}

func dial(t testing.TB, cfg temporaladmin.Config) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts, err := cfg.ClientOptions(nil)
	if err != nil {
		t.Fatalf("testtemporal: %s (%s*): %v", EnvHostPort, EnvTLS, err)
	}
	// The SDK's warnings and errors go to the test log.
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(progressWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		t.Fatalf("testtemporal: dial %s: %v", cfg.HostPort, err)
	}
	t.Cleanup(c.Close)
	return c
}
