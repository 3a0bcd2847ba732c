package main

import (
	"bytes"
	"context"
	"github.com/walkeeper/walkeeper/internal/cli"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/walkeeper/walkeeper/bench"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBadUsageExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"list", "extra"},
		{"--bogus", "list"},
		{"memory", "--reps", "many"},
		{"hostile", "--rss-guard-mib", "-1"},
		{"fairness", "--servers", "dev,bogus"},
		{"fairness", "--backlogs", "400,2000"},
		{"fairness", "--backlogs", "0,-5"},
		{"fairness", "--backlogs", "0,400,400"},
		{"fairness", "--reps", "-1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, args...)
			assert.Equal(t, cli.ExitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			assert.Equal(t, 2, strings.Count(errOut, "\n"), "one line of error and one of help: %q", errOut)
		})
	}
}

// TestListNamesEveryScenario: `walkeeper-bench list` prints one line per scenario of package
// bench, in its order.
func TestListNamesEveryScenario(t *testing.T) {
	code, out, errOut := runCLI(t, "list")
	assert.Equal(t, cli.ExitOK, code, errOut)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if assert.Len(t, lines, len(bench.Scenarios)) {
		for i, s := range bench.Scenarios {
			assert.True(t, strings.HasPrefix(lines[i], s.Name+" "), "line %d: %q", i, lines[i])
		}
	}
}
