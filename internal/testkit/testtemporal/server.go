package testtemporal

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/walkeeper/walkeeper/internal/devserver"
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
	return temporaladmin.Config{
		HostPort:      os.Getenv(EnvHostPort),
		Namespace:     os.Getenv(EnvNamespace),
		TLSCert:       os.Getenv(EnvTLSCert),
		TLSKey:        os.Getenv(EnvTLSKey),
		TLSCA:         os.Getenv(EnvTLSCA),
		TLSServerName: os.Getenv(EnvTLSServerName),
		APIKey:        os.Getenv(EnvAPIKey),
		TLS:           slices.Contains([]string{"1", "true", "yes", "on"}, strings.ToLower(os.Getenv(EnvTLS))),
	}
}

// server is a Temporal server of one Mode: started with its files in a directory, or
// (ModeExternal) someone else's, on which only the namespaces are registered.
type server struct {
	mode    Mode
	cfg     temporaladmin.Config // how to dial it, in its default namespace
	cluster *temporalcluster.Cluster
	dev     *devserver.Server
	devOpts devserver.Options
}

// startServer starts (or, in ModeExternal, connects to) a server for o with its database and
// logs under dir, and o.ExtraNamespaces registered with walkeeper's search attributes unless
// o.NoSearchAttributes.
func startServer(ctx context.Context, mode Mode, o Options, dir string, progress io.Writer) (*server, error) {
	attrs := !o.NoSearchAttributes
	switch mode {
	case ModeCluster:
		cl, err := temporalcluster.Start(ctx, temporalcluster.Options{Dir: dir, Namespaces: append([]string{defaultNamespace}, o.ExtraNamespaces...),
			Progress: progress, DynamicConfig: o.DynamicConfig, SearchAttributes: attrs})
		if err != nil {
			return nil, fmt.Errorf("start PostgreSQL-backed Temporal (logs in %s): %w", dir, err)
		}
		return &server{mode: mode, cluster: cl, cfg: temporaladmin.Config{HostPort: cl.HostPort(), Namespace: defaultNamespace}}, nil
	case ModeExternal:
		cfg := ExternalConfig()
		cfg.Namespace = cmp.Or(cfg.Namespace, defaultNamespace)
		c, err := dialContext(ctx, cfg, progress)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		for _, ns := range append([]string{cfg.Namespace}, o.ExtraNamespaces...) {
			if err := temporalcluster.RegisterNamespace(ctx, c, ns, attrs); err != nil {
				return nil, fmt.Errorf("%s=%s: %w", EnvHostPort, cfg.HostPort, err)
			}
		}
		return &server{mode: mode, cfg: cfg}, nil
	}
	s := &server{mode: mode, devOpts: devserver.Options{Install: true, DataDir: dir, ScratchDB: true, Headless: true, LogLevel: "error",
		ExtraNamespaces: o.ExtraNamespaces, NoSearchAttributes: o.NoSearchAttributes, Progress: progress,
		StartTimeout: 3 * time.Minute}} // a loaded machine stretches the start
	for _, k := range slices.Sorted(maps.Keys(o.DynamicConfig)) {
		s.devOpts.DynamicConfig = append(s.devOpts.DynamicConfig, fmt.Sprintf("%s=%v", k, o.DynamicConfig[k]))
	}
	if err := s.startDev(ctx); err != nil {
		return nil, err
	}
	s.cfg = temporaladmin.Config{HostPort: s.dev.HostPort(), Namespace: defaultNamespace}
	return s, nil
}

func (s *server) startDev(ctx context.Context) (err error) {
	if s.dev, err = devserver.Start(ctx, s.devOpts); err != nil {
		return fmt.Errorf("start Temporal dev server: %w", err)
	}
	return nil
}

// stop stops a server startServer started; an external one is left alone.
func (s *server) stop() error {
	switch {
	case s.cluster != nil:
		return s.cluster.Stop()
	case s.dev != nil:
		return s.dev.Stop()
	}
	return nil
}

// restart stops the server process (SIGTERM) and starts it again on the same database and
// address; it returns once the frontend serves the namespaces again.
func (s *server) restart(ctx context.Context) error {
	if s.cluster != nil {
		return s.cluster.RestartServer(ctx, false)
	}
	// The same port: devserver.Start would pick a free one.
	if err := s.dev.Stop(); err != nil {
		return fmt.Errorf("stop dev server: %w", err)
	}
	s.devOpts.Port, s.dev = s.dev.Port(), nil
	return s.startDev(ctx)
}

// dialContext dials cfg with the SDK's warnings and errors going to progress.
func dialContext(ctx context.Context, cfg temporaladmin.Config, progress io.Writer) (client.Client, error) {
	opts, err := cfg.ClientOptions(nil)
	if err != nil {
		return nil, fmt.Errorf("%s (%s*): %w", EnvHostPort, EnvTLS, err)
	}
	opts.Logger = sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(progress, &slog.HandlerOptions{Level: slog.LevelWarn})))
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", cfg.HostPort, err)
	}
	return c, nil
}
