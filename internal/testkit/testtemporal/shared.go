package testtemporal

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
)

// shared is one Temporal server for a whole test binary (started from TestMain, which has
// no testing.T): the dev server, the PostgreSQL-backed cluster or an existing server, as
// EnvServer and EnvHostPort select.
type shared struct {
	mode     Mode
	hostPort string
	cliPath  string       // a Temporal CLI that can drive the server
	stop     func() error // stops a server startShared started (nothing for an existing one)
}

// startShared starts (or, with EnvHostPort, connects to) the selected server, its database
// and logs under dir, with namespaces created with walkeeper's search attributes (besides
// "default"). The caller calls stop.
func startShared(ctx context.Context, dir string, namespaces []string, progress io.Writer) (*shared, error) {
	mode, err := SelectedMode()
	if err != nil {
		return nil, err
	}
	// The tests drive any of the servers through the CLI too; the dev server is this CLI.
	cli, err := devserver.EnsureCLI(ctx, "", progress)
	if err != nil {
		return nil, err
	}
	switch mode {
	case ModeCluster:
		cl, err := temporalcluster.Start(ctx, clusterOptions(Options{ExtraNamespaces: namespaces}, filepath.Join(dir, "temporal"), progress))
		if err != nil {
			return nil, fmt.Errorf("start PostgreSQL-backed Temporal (logs in %s): %w", dir, err)
		}
		return &shared{mode: mode, hostPort: cl.HostPort(), cliPath: cli, stop: cl.Stop}, nil
	case ModeExternal:
		cfg := ExternalConfig()
		if cfg.Namespace != "" {
			return nil, fmt.Errorf("%s is not supported by suites that create a namespace per test; unset it", EnvNamespace)
		}
		if cfg.TLS || cfg.TLSCert != "" || cfg.TLSCA != "" || cfg.APIKey != "" {
			return nil, fmt.Errorf("%s with TLS or an API key: the suites started from TestMain dial without TLS; run them against a plain-text frontend", EnvHostPort)
		}
		c, err := client.DialContext(ctx, client.Options{HostPort: cfg.HostPort, Namespace: defaultNamespace, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvHostPort, cfg.HostPort, err)
		}
		defer c.Close()
		for _, ns := range namespaces {
			if err := temporalcluster.RegisterNamespace(ctx, c, ns, contract.SearchAttributes); err != nil {
				return nil, fmt.Errorf("%s=%s: %w", EnvHostPort, cfg.HostPort, err)
			}
		}
		return &shared{mode: mode, hostPort: cfg.HostPort, cliPath: cli, stop: func() error { return nil }}, nil
	}
	opts := devOptions(Options{ExtraNamespaces: namespaces}, filepath.Join(dir, "temporal"))
	opts.CLIPath = cli
	opts.StartTimeout = 3 * time.Minute // a loaded machine stretches the start
	opts.Progress = progress
	srv, err := devserver.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start Temporal dev server: %w", err)
	}
	return &shared{mode: ModeDev, hostPort: srv.HostPort(), cliPath: cli, stop: srv.Stop}, nil
}
