// Package temporalcluster runs a real Temporal server for tests: the production server
// binary (not the CLI's dev server) on PostgreSQL 15, with several history shards and SQL
// visibility, on free loopback ports. The Temporal server process and PostgreSQL can each be
// restarted on their own, for the reliability suite.
//
// The binaries come from scripts/install-temporal-server.sh (server and temporal-sql-tool,
// with the schema files) and scripts/install-postgres.sh. Start takes 15-60 s on a loaded
// 2-core machine: initdb, the schema tool's ~30 migration steps, and the server's start.
package temporalcluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// Versions this package is built and tested against. scripts/install-temporal-server.sh
// installs ServerVersion; docker-compose.yml runs the same (test/deploy/compose_sync_test.go keeps them equal).
const (
	ServerVersion = "v1.29.1"
	PostgresMajor = "15"
)

// Tools installed by scripts/install-temporal-server.sh.
var (
	ServerTool  = testbin.Tool{Name: "temporal-server", Script: "scripts/install-temporal-server.sh", EnvVar: "WALKEEPER_TEMPORAL_SERVER_BIN"}
	SQLToolTool = testbin.Tool{Name: "temporal-sql-tool", Script: "scripts/install-temporal-server.sh", EnvVar: "WALKEEPER_TEMPORAL_SQL_TOOL_BIN"}
)

// DefaultHistoryShards is the shard count of the test cluster: more than one, so that
// workflows of one test land on different shards and cross-shard paths (child workflows,
// signals, schedules) run as in production, but few enough to start fast.
const DefaultHistoryShards = 4

// Options configure Start.
type Options struct {
	// Dir receives the server's config, its log and PostgreSQL's log. Required.
	Dir string
	// Namespaces registered at start (retention one day); empty = just "default".
	Namespaces []string
	// SearchAttributes registers walkeeper's search attributes in every namespace of Namespaces.
	SearchAttributes bool
	// DynamicConfig adds or overrides keys (unconstrained values) of DefaultDynamicConfigBase,
	// so the test cluster and compose run one configuration.
	DynamicConfig map[string]any
	// Progress receives one line per start phase; nil = discard.
	Progress io.Writer
	// MetricsPort serves the server's Prometheus metrics on 127.0.0.1; 0 = none.
	MetricsPort int
}

// Cluster is a running Temporal server on its own PostgreSQL.
type Cluster struct {
	opts Options
	pg   *Postgres
	bin  string
	log  string
	srv  *proc.Proc
	port int // the frontend's
	// namespacesDone are the namespaces registered so far; a restarted server is ready once
	// it serves them all.
	namespacesDone []string
}

// Start sets up PostgreSQL and the schemas, starts the server and registers the namespaces
// and search attributes. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.Dir == "" {
		return nil, errors.New("temporalcluster: Options.Dir is required")
	}
	if len(o.Namespaces) == 0 {
		o.Namespaces = []string{"default"}
	}
	progress := cmp.Or(o.Progress, io.Discard)
	// Every missing piece at once, so that one run of the installers is enough.
	bin, err1 := testbin.Find(ServerTool)
	sqlTool, err2 := testbin.Find(SQLToolTool)
	schemaRoot, err3 := findSchemaRoot(ServerVersion)
	pgBin, err4 := findPostgresBinDir()
	dcBase, err5 := DefaultDynamicConfigBase()
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, "config"), 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, bin: bin, log: filepath.Join(o.Dir, "temporal.log")}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()

	start := time.Now()
	if c.pg, err = startPostgres(ctx, pgBin, filepath.Join(o.Dir, "postgres.log")); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "temporalcluster: PostgreSQL on 127.0.0.1:%d (%s)\n", c.pg.port, time.Since(start).Round(time.Millisecond))
	if err := setupSchemas(ctx, sqlTool, schemaRoot, c.pg.port, filepath.Join(o.Dir, "schema.log")); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "temporalcluster: schemas applied (%s)\n", time.Since(start).Round(time.Millisecond))

	dcPath := filepath.Join(o.Dir, "config", "dynamicconfig.yaml")
	if err := writeDynamicConfig(dcPath, dcBase, o.DynamicConfig); err != nil {
		return nil, err
	}
	ports, err := newPorts()
	if err != nil {
		return nil, err
	}
	c.port = ports[0]
	cfg, err := serverConfig(ports, c.pg.port, dcPath, o.MetricsPort)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "config", "development.yaml"), cfg, 0o644); err != nil {
		return nil, err
	}
	if err := c.startServer(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "temporalcluster: server %s on %s (%s)\n", ServerVersion, c.HostPort(), time.Since(start).Round(time.Millisecond))
	if err := c.registerNamespaces(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "temporalcluster: namespaces %v ready (%s)\n", o.Namespaces, time.Since(start).Round(time.Millisecond))
	return c, nil
}

// DefaultDynamicConfigBase is deploy/temporal/dynamicconfig.yaml, the file docker-compose
// mounts into its Temporal server.
func DefaultDynamicConfigBase() (string, error) {
	root, err := cachebin.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "deploy", "temporal", "dynamicconfig.yaml"), nil
}

// HostPort is the frontend's gRPC address.
func (c *Cluster) HostPort() string { return proc.Addr(c.port) }

// ServerPID is the Temporal server process's id; PostgreSQL's processes are separate.
func (c *Cluster) ServerPID() int { return c.srv.PID() }

// startServer starts the Temporal server process on the config in opts.Dir (the server's
// --root), and waits until the frontend answers and every namespace is served.
func (c *Cluster) startServer(ctx context.Context) error {
	p, err := proc.Start(proc.Spec{
		Path: c.bin,
		Args: []string{"--root", c.opts.Dir, "--config", "config", "--env", "development", "--allow-no-auth", "start"},
		Log:  c.log,
	})
	if err != nil {
		return err
	}
	c.srv = p
	return c.waitReady(ctx, 3*time.Minute)
}

// RestartServer stops the server process and starts it again on the same config, ports and
// database: SIGTERM (graceful: shards released, connections drained), SIGKILL after 30 s;
// with kill set it is SIGKILLed at once, like a crash.
func (c *Cluster) RestartServer(ctx context.Context, kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	if err := c.srv.Stop(sig, 30*time.Second); err != nil {
		return err
	}
	return c.startServer(ctx)
}

// RestartPostgres stops PostgreSQL in mode and starts it again, with the Temporal server
// left running: the server must ride out the outage on its connection pool's retries.
// It returns once PostgreSQL accepts connections and the frontend serves again.
func (c *Cluster) RestartPostgres(ctx context.Context, mode StopMode) error {
	if err := c.pg.Stop(mode); err != nil {
		return err
	}
	if err := c.pg.Start(ctx); err != nil {
		return err
	}
	return c.waitReady(ctx, 3*time.Minute)
}

// Stop stops the server and PostgreSQL and deletes the database directory.
func (c *Cluster) Stop() error {
	var errs []error
	if c.srv != nil {
		errs = append(errs, c.srv.Stop(syscall.SIGTERM, 30*time.Second))
	}
	if c.pg != nil {
		errs = append(errs, c.pg.Stop(Fast), os.RemoveAll(filepath.Dir(c.pg.dataDir)))
	}
	return errors.Join(errs...)
}

// waitReady polls until the frontend describes every namespace that is registered already
// (the first start: the system namespace).
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	return c.srv.WaitFor(ctx, timeout, func() error {
		return devserver.ServesFrom(ctx, c.srv, c.port, append([]string{"temporal-system"}, c.namespacesDone...)...)
	})
}

func (c *Cluster) registerNamespaces(ctx context.Context) error {
	cl, err := client.Dial(client.Options{HostPort: c.HostPort(), Logger: devserver.DiscardLogger})
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, ns := range c.opts.Namespaces {
		if err := RegisterNamespace(ctx, cl, ns, c.opts.SearchAttributes); err != nil {
			return err
		}
		c.namespacesDone = append(c.namespacesDone, ns)
	}
	return nil
}

// RegisterNamespace registers namespace ns (retention one day) unless it exists, with
// walkeeper's search attributes when attrs (temporaladmin.EnsureSearchAttributes), and waits
// until the frontend serves it. It works on any cluster (the tests' own or an existing one)
// whose credentials allow it.
func RegisterNamespace(ctx context.Context, cl client.Client, ns string, attrs bool) error {
	// Describe first: on someone else's cluster the namespace usually exists, and the
	// credentials may allow using it but not registering one.
	_, err := cl.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if _, notFound := errors.AsType[*serviceerror.NamespaceNotFound](err); notFound {
		_, err = cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        ns,
			WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
		})
		if _, exists := errors.AsType[*serviceerror.NamespaceAlreadyExists](err); err != nil && !exists {
			return fmt.Errorf("register namespace %s: %w", ns, err)
		}
	} else if err != nil {
		return fmt.Errorf("describe namespace %s: %w", ns, err)
	}
	// A new namespace reaches the frontend's namespace registry within its refresh interval
	// (~10 s). DescribeNamespace reads the database and answers at once; the calls that go
	// through the registry (visibility, the operator API) say "not found" until then.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cl.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
		if err == nil {
			_, err = cl.WorkflowService().CountWorkflowExecutions(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: ns})
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("namespace %s not served after registration: %w", ns, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if !attrs {
		return nil
	}
	return temporaladmin.EnsureSearchAttributes(ctx, cl, ns)
}
