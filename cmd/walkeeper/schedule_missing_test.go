package main

import (
	"testing"

	"github.com/walkeeper/walkeeper/internal/cli"
)

// A schedule that does not exist is bad input said in one line that names it and how to
// create it: describe, pause, resume and trigger printed Temporal's text about the schedule's
// internal workflow ("workflow not found for ID: temporal-sys-scheduler:…") and exited 1.
func TestScheduleThatDoesNotExistIsBadInput(t *testing.T) {
	tn := newTemporalNS(t) // a new namespace: no schedule exists yet
	noDev(t)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "walkeeper: schedule walkeeper-sweep does not exist; create it with: walkeeper schedule ensure " +
			"(a worker creates it on start unless its --sweep-interval is 0)"},
		{[]string{"--target", "generic:nope"}, "walkeeper: schedule merge-wal-tick/generic/nope does not exist; " +
			"create it with: walkeeper schedule ensure --target generic:nope"},
	} {
		for _, sub := range []string{"describe", "pause", "resume", "trigger"} {
			tn.refused(t, cli.ExitUsage, tc.want+"\n", append([]string{"schedule", sub}, tc.flags...)...)
		}
	}
}
