package main

import (
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
