package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/cli"
)

// A worker that cannot be reached is waited out a second at a time, as the load's
// documentation says: the load went on at its full request rate, a connection attempt and
// a stderr line per request (a thousand a second at --rate 1000 --batch 1).
func TestLoadWaitsOutAnUnreachableWorker(t *testing.T) {
	code, out, errOut := runCLI(t, "load", "--http", "http://127.0.0.1:1", "--target", "generic:demo",
		"--rate", "1000", "--batch", "1", "--duration", "1s", "--flush-every", "0")
	require.Equal(t, cli.ExitOK, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	attempts := strings.Count(errOut, "load: append via")
	assert.GreaterOrEqual(t, attempts, 1, errOut)
	assert.LessOrEqual(t, attempts, 3, "one attempt a second while the worker is unreachable")
}

// A store that does not exist is bad input (exit 2), as for merge and status: the worker's
// 404 store_not_found is said as theirs is, with the worker's URL in the create hint.
func TestLoadOfAStoreThatDoesNotExistIsBadInput(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"store_not_found","error":"store generic:nope: not found"}`))
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, "load", "--http", srv.URL, "--target", "generic:nope", "--duration", "10s", "--flush-every", "0")
	require.Equal(t, cli.ExitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	assert.True(t, strings.HasPrefix(errOut, "walkeeper: store generic:nope does not exist; create it with: curl -XPOST "+
		srv.URL+"/api/v1/stores/generic/nope "), errOut)
}
