// Package upgrade proves the upgrade procedure of docs/OPERATIONS.md §9 end to end: a fleet of
// two `walkeeper worker` processes of build A (this tree) is upgraded by a rolling restart
// (SIGTERM, drain, the same instance on build B) to build B (this tree with
// testdata/note-merge-plan.patch applied: a new activity in MergeWal behind a
// workflow.GetVersion gate) while MergeWal runs are in flight on a real Temporal server (the
// dev server, or the PostgreSQL-backed cluster with WALKEEPER_TEST_TEMPORAL_SERVER=cluster).
//
// It proves that every merge completes; that no workflow task failed (no non-determinism);
// that runs which started on A keep A's path even when B finishes them, and runs which start
// on B run the new activity; that build B replays every history recorded in
// workflows/testdata/replay; and, by the reliability suite's oracle, that every acknowledged
// row reads back with its newest value, nothing is read twice, nothing stays pending, and the
// merges reclaimed exactly the generations that were sealed.
//
// Build B is produced with `go build -overlay`, never by editing the checkout; the product
// carries no hook for it. If the patch no longer applies the test fails and says so.
//
// `go test -short` skips the package.
package upgrade
