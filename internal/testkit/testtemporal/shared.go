package testtemporal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
)

// SharedOptions configure StartShared.
type SharedOptions struct {
	// Dir holds the server's database and logs. Required.
	Dir string
	// Namespaces are created with walkeeper's search attributes (besides "default").
	Namespaces []string
	// Progress receives the start phases; nil = discard.
	Progress io.Writer
}

// Shared is one Temporal server for a whole test binary (started from TestMain, which has
// no testing.T): the dev server, the PostgreSQL-backed cluster or an existing server, as
// EnvServer and EnvHostPort select.
type Shared struct {
	mode     Mode
	hostPort string
	cli      string
	stop     func() error
}

// StartShared starts (or, with EnvHostPort, connects to) the selected server. The caller
// calls Stop.
func StartShared(ctx context.Context, o SharedOptions) (*Shared, error) {
	mode, err := SelectedMode()
	if err != nil {
		return nil, err
	}
	switch mode {
	case ModeCluster:
		cl, err := temporalcluster.Start(ctx, temporalcluster.Options{
			Dir:              filepath.Join(o.Dir, "temporal"),
			Namespaces:       append([]string{defaultNamespace}, o.Namespaces...),
			SearchAttributes: contract.SearchAttributes,
			Progress:         o.Progress,
		})
		if err != nil {
			return nil, fmt.Errorf("start PostgreSQL-backed Temporal (logs in %s): %w", o.Dir, err)
		}
		// The CLI talks to any server; tests that drive Temporal through it use this one.
		cli, err := devserver.EnsureCLI(ctx, "", o.Progress)
		if err != nil {
			_ = cl.Stop()
			return nil, err
		}
		return &Shared{mode: mode, hostPort: cl.HostPort(), cli: cli, stop: cl.Stop}, nil
	case ModeExternal:
		cfg, _ := ExternalConfig()
		if cfg.Namespace != "" {
			return nil, fmt.Errorf("%s is not supported by suites that create a namespace per test; unset it", EnvNamespace)
		}
		if cfg.TLS || cfg.TLSCert != "" || cfg.TLSCA != "" || cfg.APIKey != "" {
			return nil, fmt.Errorf("%s with TLS or an API key: the suites started from TestMain dial without TLS; run them against a plain-text frontend", EnvHostPort)
		}
		c, err := client.DialContext(ctx, client.Options{HostPort: cfg.HostPort, Namespace: defaultNamespace, Logger: nopSDKLogger{}})
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", EnvHostPort, cfg.HostPort, err)
		}
		defer c.Close()
		for _, ns := range o.Namespaces {
			if err := temporalcluster.RegisterNamespace(ctx, c, ns, contract.SearchAttributes); err != nil {
				return nil, fmt.Errorf("%s=%s: %w", EnvHostPort, cfg.HostPort, err)
			}
		}
		cli, err := devserver.EnsureCLI(ctx, "", o.Progress)
		if err != nil {
			return nil, err
		}
		return &Shared{mode: mode, hostPort: cfg.HostPort, cli: cli, stop: func() error { return nil }}, nil
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		Install:         true,
		DataDir:         filepath.Join(o.Dir, "temporal"),
		ScratchDB:       true,
		Headless:        true,
		ExtraNamespaces: o.Namespaces,
		LogLevel:        "error",
		StartTimeout:    3 * time.Minute, // a loaded machine stretches the start
		Progress:        o.Progress,
	})
	if err != nil {
		return nil, fmt.Errorf("start Temporal dev server: %w", err)
	}
	return &Shared{mode: ModeDev, hostPort: srv.HostPort(), cli: srv.CLIPath(), stop: srv.Stop}, nil
}

// HostPort is the frontend's address.
func (s *Shared) HostPort() string { return s.hostPort }

// CLIPath is a Temporal CLI that can drive the server.
func (s *Shared) CLIPath() string { return s.cli }

// Mode says which server this is.
func (s *Shared) Mode() Mode { return s.mode }

// Stop stops a server StartShared started (nothing for an existing one).
func (s *Shared) Stop() error {
	if s == nil || s.stop == nil {
		return errors.New("testtemporal: Stop of a server that was not started")
	}
	return s.stop()
}

type nopSDKLogger struct{}

func (nopSDKLogger) Debug(string, ...any) {}
func (nopSDKLogger) Info(string, ...any)  {}
func (nopSDKLogger) Warn(string, ...any)  {}
func (nopSDKLogger) Error(string, ...any) {}
