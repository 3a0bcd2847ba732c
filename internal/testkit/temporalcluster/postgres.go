package temporalcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// PostgresUser is the database role Temporal connects as (trust authentication on
// loopback: a throw-away test database, never a deployment).
const PostgresUser = "temporal"

// StopMode says how PostgreSQL is stopped: the signal its postmaster gets.
type StopMode syscall.Signal

const (
	// Fast rolls back open transactions, checkpoints and exits (SIGINT): a clean restart.
	Fast = StopMode(syscall.SIGINT)
	// Immediate exits at once without a checkpoint (SIGQUIT), like a crash: the next start
	// runs crash recovery from the WAL. Committed transactions survive (fsync is off, but the
	// OS keeps the page cache; only a machine crash would lose them).
	Immediate = StopMode(syscall.SIGQUIT)
)

// Postgres is a PostgreSQL server in a private data directory on a loopback port.
type Postgres struct {
	binDir  string
	dataDir string // owned by the server's OS user
	log     string
	port    int
	cred    *syscall.Credential
	p       *proc.Proc
}

// startPostgres initdbs a fresh cluster in a new directory under os.TempDir (it must be
// reachable by the postgres OS user, which a test's 0700 TempDir is not) and starts it.
func startPostgres(ctx context.Context, binDir, logPath string) (_ *Postgres, err error) {
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "walkeeper-pg-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	port, err := testbin.FreePort()
	if err != nil {
		return nil, err
	}
	pg := &Postgres{binDir: binDir, dataDir: filepath.Join(dir, "data"), log: logPath, port: port, cred: cred}
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), "-D", pg.dataDir, "-U", PostgresUser,
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := pg.Start(ctx); err != nil {
		_ = pg.Stop(Immediate) // it may have started without becoming ready
		return nil, err
	}
	return pg, nil
}

// postgresCredential is the OS user PostgreSQL runs as: initdb and postgres refuse to run as
// root, so as root they run as the "postgres" user (Debian's packages create it); otherwise
// as the current user.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres OS user (scripts/install-postgres.sh): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Start starts the server on its data directory and port, and waits until it accepts
// connections. fsync and full-page writes are off: a test database need not survive a
// machine crash, and on a shared 2-core machine they cost seconds per Temporal start.
func (pg *Postgres) Start(ctx context.Context) error {
	p, err := proc.Start(proc.Spec{
		Path: filepath.Join(pg.binDir, "postgres"),
		Args: []string{"-D", pg.dataDir, "-p", strconv.Itoa(pg.port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + pg.dataDir,
			"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300",
			"-c", "log_min_messages=warning"},
		Log:        pg.log,
		Credential: pg.cred,
	})
	if err != nil {
		return err
	}
	pg.p = p
	return p.WaitFor(ctx, 2*time.Minute, func() error {
		cmd := exec.CommandContext(ctx, filepath.Join(pg.binDir, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(pg.port))
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("pg_isready: %w", err)
		}
		return nil
	})
}

// Stop stops the server (see StopMode); it is SIGKILLed if it has not exited in 60 s.
func (pg *Postgres) Stop(mode StopMode) error {
	if pg.p == nil {
		return nil
	}
	return pg.p.Stop(syscall.Signal(mode), time.Minute)
}

// findPostgresBinDir locates PostgreSQL's bin directory (initdb, postgres, pg_isready):
// $WALKEEPER_POSTGRES_BIN_DIR, else the directory of the `postgres` on PATH (symlinks
// resolved), else Debian's /usr/lib/postgresql/15/bin.
func findPostgresBinDir() (string, error) {
	if d := os.Getenv("WALKEEPER_POSTGRES_BIN_DIR"); d != "" {
		return d, nil
	}
	candidates := []string{}
	if p, err := exec.LookPath("postgres"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(r))
		}
	}
	candidates = append(candidates, "/usr/lib/postgresql/"+PostgresMajor+"/bin")
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL %s: %w (no initdb beside a postgres on PATH nor in /usr/lib/postgresql/%s/bin; run scripts/install-postgres.sh)", PostgresMajor, testbin.ErrNotInstalled, PostgresMajor)
}
