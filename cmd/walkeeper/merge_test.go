package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/walkeeper/walkeeper/internal/cli"
)

// A pass-size knob MergeWal would refuse is a usage error naming the flag, said before
// anything is dialed: with Temporal down it read "cannot reach Temporal" (exit 1).
func TestMergeKnobsAreRefusedBeforeDialing(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-generations", "-5"}, "--max-generations -5"},
		{[]string{"--max-generations", "100001"}, "--max-generations 100001"},
		{[]string{"--max-bytes", "5"}, "--max-bytes 5"},
		{[]string{"--max-bytes", "-1"}, "--max-bytes -1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"merge", "generic:a", "--temporal", "127.0.0.1:1"}, tc.args...)
			code, out, errOut := runCLI(t, args...)
			assert.Equal(t, cli.ExitUsage, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			assert.Contains(t, errOut, tc.want)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		})
	}
}
