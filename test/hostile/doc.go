// Package hostile attacks a real `walkeeper worker` process the way a hostile or careless
// client would, one test per class of attack: wide rows that decode to gigabytes, reads of a
// huge unsealed memtable, pages of huge rows, over-long keys, writers racing the pending cap,
// foreign and damaged objects in the storage root, JSON members that differ only in case,
// slow and idle connections, requests from a browser on another site, and workflow inputs
// that would run away. Each test asserts the answer (status and stable error code), that
// nothing was written (the storage root's listing, or the store's stats, are unchanged), and
// that the worker stayed alive and within its memory settings (peak RSS, VmHWM, below the
// sum of its budgets plus a fixed slack; see memoryBound).
//
// The worker is the binary built from ./cmd/walkeeper once per test binary, on a file://
// root in a temporary directory, connected to a Temporal server that TestMain starts through
// internal/testkit/testtemporal (the CLI's dev server by default), one namespace per test. `go test
// -short` skips the package.
//
// To show that each test fails before its fix, run the same suite against an older build:
//
//	go build -o /tmp/walkeeper-old ./cmd/walkeeper   # at the older commit
//	WALKEEPER_HOSTILE_BIN=/tmp/walkeeper-old go test -count=1 ./test/hostile
//
// Knobs that older builds do not have (--memtable-bytes, --max-connections,
// --http-read-timeout, ...) are passed as WALKEEPER_* environment variables rather than
// flags: an older binary refuses an unknown flag but ignores an unknown variable, so it
// still starts and each test fails on the behaviour it checks, not on the command line.
package hostile
