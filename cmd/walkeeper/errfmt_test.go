package main

import (
	"errors"
	"fmt"
	"github.com/walkeeper/walkeeper/internal/cli"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// noDev makes the test independent of a `walkeeper dev` running in the package directory.
func noDev(t *testing.T) {
	t.Setenv(devDataEnv, t.TempDir())
}

func TestErrorFirstLineBadTarget(t *testing.T) {
	noDev(t)
	for _, args := range [][]string{{"merge", "foo"}, {"compact", "foo"}, {"history", "foo"}, {"status", "foo"}} {
		code, _, errOut := runCLI(t, args...)
		assert.Equal(t, cli.ExitUsage, code)
		assert.Equal(t, fmt.Sprintf(`walkeeper: target "foo": want <kind>:<name>, e.g. generic:gs (see 'walkeeper %s --help')`, args[0]),
			firstLine(errOut))
	}
}

func TestErrorFirstLineUnreachableTemporal(t *testing.T) {
	noDev(t)
	for _, args := range [][]string{{"merge", "generic:x"}, {"history", "generic:x"}, {"schedule", "describe"}} {
		code, _, errOut := runCLI(t, append(args, "--temporal", "127.0.0.1:1")...)
		assert.Equal(t, cli.ExitFailure, code)
		assert.Equal(t, "walkeeper: cannot reach Temporal at 127.0.0.1:1 (namespace default): connection refused; "+
			"start one with 'walkeeper dev' or pass --temporal HOST:PORT", firstLine(errOut), "walkeeper %v", args)
	}
}

// TestErrorFirstLineMissingStore: the store check runs before Temporal is dialled (the
// address here is unreachable, so reaching it would print another line).
func TestErrorFirstLineMissingStore(t *testing.T) {
	noDev(t)
	storage := "file://" + filepath.ToSlash(t.TempDir()) // a root with no stores
	code, _, errOut := runCLI(t, "merge", "generic:nope", "--storage", storage, "--temporal", "127.0.0.1:1")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Equal(t, `walkeeper: store generic:nope does not exist; create it with: curl -XPOST http://<worker>/api/v1/stores/generic/nope`+
		` -H 'Content-Type: application/json' -d '{"fields":[{"name":"id","type":"string"}, ...]}'`, firstLine(errOut))

	code, _, errOut = runCLI(t, "compact", "rollout:nope", "--storage", storage, "--temporal", "127.0.0.1:1")
	assert.Equal(t, cli.ExitUsage, code)
	assert.Equal(t, `walkeeper: store rollout:nope does not exist; create it with: curl -XPOST http://<worker>/api/v1/stores/rollout/nope`, firstLine(errOut))

	// status TARGET refuses it the same way (exit 2), its storage read while Temporal is down.
	code, _, errOut = runCLI(t, "status", "generic:nope", "--storage", storage, "--temporal", "127.0.0.1:1")
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.True(t, strings.HasPrefix(errOut, "walkeeper: store generic:nope does not exist; create it with: curl "), errOut)

	// WALKEEPER_STORAGE works like the flag.
	t.Setenv("WALKEEPER_STORAGE", storage)
	code, _, errOut = runCLI(t, "merge", "generic:nope", "--temporal", "127.0.0.1:1")
	assert.Equal(t, cli.ExitUsage, code)
	assert.True(t, strings.HasPrefix(errOut, "walkeeper: store generic:nope does not exist;"), errOut)
}

// TestErrorFirstLineMissingStoreUnderDev: a running dev (its lock held and dev.json written)
// supplies the storage and the worker URL of the create hint.
func TestErrorFirstLineMissingStoreUnderDev(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(devDataEnv, dir)
	t.Setenv("WALKEEPER_STORAGE", "")
	lock, err := lockDataDir(dir, currentHolder())
	require.NoError(t, err)
	defer lock.Close()
	storage := "file://" + filepath.ToSlash(filepath.Join(dir, "storage"))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "storage"), 0o755)) // as dev's workers make it
	require.NoError(t, writeDevState(dir, devState{lockHolder: lockHolder{PID: 1}, Storage: storage, Temporal: "127.0.0.1:1", Namespace: "default",
		HTTP: []string{"http://127.0.0.1:18081"}}))
	code, _, errOut := runCLI(t, "merge", "generic:nope")
	assert.Equal(t, cli.ExitUsage, code)
	assert.True(t, strings.HasPrefix(firstLine(errOut),
		"walkeeper: store generic:nope does not exist; create it with: curl -XPOST http://127.0.0.1:18081/api/v1/stores/generic/nope "), errOut)

	// schedule ensure --target, status TARGET and quarantine of the dev's storage refuse it
	// alike, with the same hint (ensure created the schedule; status and quarantine named
	// http://<worker>).
	devStorage := "--storage=" + storage
	for _, args := range [][]string{
		{"schedule", "ensure", "--target", "generic:nope"},
		{"status", "generic:nope"},
		{"quarantine", "generic:nope", "generic/nope/data/x.parquet", "--reason", "r", devStorage},
	} {
		code, _, errOut := runCLI(t, args...)
		assert.Equal(t, cli.ExitUsage, code, "walkeeper %v: %s", args, errOut)
		assert.True(t, strings.HasPrefix(firstLine(errOut),
			"walkeeper: store generic:nope does not exist; create it with: curl -XPOST http://127.0.0.1:18081/api/v1/stores/generic/nope "),
			"walkeeper %v: %s", args, errOut)
	}
	// Another storage is not the dev workers': its hint names no worker of theirs.
	other := "file://" + filepath.ToSlash(t.TempDir())
	code, _, errOut = runCLI(t, "merge", "generic:nope", "--storage", other)
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.True(t, strings.HasPrefix(firstLine(errOut), "walkeeper: store generic:nope does not exist; create it with: curl -XPOST http://<worker>/"), errOut)

	// An existing store passes the check; the dev's Temporal address is then used.
	db, err := store.OpenDB(t.Context(), storage, store.DefaultOptions())
	require.NoError(t, err)
	_, err = db.Create(t.Context(), store.Target{Kind: store.KindRollout, Name: "there"}, store.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, db.Close(t.Context()))
	for _, args := range [][]string{{"merge", "rollout:there"}, {"schedule", "ensure", "--target", "rollout:there"}} {
		code, _, errOut = runCLI(t, args...)
		assert.Equal(t, cli.ExitFailure, code, "walkeeper %v", args)
		assert.True(t, strings.HasPrefix(errOut, "walkeeper: cannot reach Temporal at 127.0.0.1:1 "), "walkeeper %v: %s", args, errOut)
	}

	// status reads the dev's storage too, and still prints it when Temporal is down.
	code, out, errOut := runCLI(t, "status")
	assert.Equal(t, cli.ExitFailure, code)
	assert.Contains(t, out, "Stores (1):")
	assert.Contains(t, out, "rollout:there")
	assert.True(t, strings.HasPrefix(errOut, "walkeeper: cannot reach Temporal at 127.0.0.1:1 "), errOut)

	// A dev that stopped (lock released) is not trusted: its storage is not used.
	lock.Close()
	code, _, errOut = runCLI(t, "merge", "generic:nope", "--temporal", "127.0.0.1:1")
	assert.Equal(t, cli.ExitFailure, code)
	assert.True(t, strings.HasPrefix(errOut, "walkeeper: cannot reach Temporal at 127.0.0.1:1 "), errOut)
}

func TestErrorLine(t *testing.T) {
	inner := temporal.NewNonRetryableApplicationError(`store generic:x: blob get "_registry/generic/x.json": not found`, contract.ErrTypeNotFound, nil)
	mid := temporal.NewApplicationErrorWithCause("prepare failed", "", inner)
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf(`target "foo": %w`, fmt.Errorf(`%w: target "foo": want <kind>:<name>`, store.ErrInvalidInput)),
			`target "foo": want <kind>:<name>`},
		{fmt.Errorf("MergeWal generic:x (workflow merge-wal/generic/x, run r1): %w", mid),
			`MergeWal generic:x (workflow merge-wal/generic/x, run r1): prepare failed: store generic:x: blob get "_registry/generic/x.json": not found`},
		// An activity's error as it crosses Temporal: the Go error's text, then its chain again.
		{fmt.Errorf("wait: %w", temporal.NewApplicationErrorWithCause(`store generic:x: blob get "k": not found`, contract.ErrTypeNotFound,
			temporal.NewApplicationErrorWithCause(`blob get "k": not found`, "wrapError", temporal.NewApplicationError("not found", "errorString")))),
			`wait: store generic:x: blob get "k": not found`},
		{fmt.Errorf("wait: %w", temporal.NewTimeoutError(0, nil)), "wait: "},
		{errors.New("dev server exited; output:\nline 2\nline 3"), "dev server exited; output"},
		{errors.New("store a: store a: not found"), "store a: not found"},
		// A trailing mark is the cause and stays.
		{fmt.Errorf("x: %w", store.ErrInvalidInput), "x: invalid input"},
	} {
		got := errorLine(c.err)
		if c.want == "wait: " {
			assert.True(t, strings.HasPrefix(got, "wait: ") && !strings.Contains(got, "(type:"), got)
			continue
		}
		assert.Equal(t, c.want, got)
		assert.NotContains(t, got, "retryable")
	}
}
