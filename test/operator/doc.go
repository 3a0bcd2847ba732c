// Package operator proves that every action Temporal Web and the Temporal CLI offer on a
// walkeeper workflow is safe. It drives two real `walkeeper worker` processes (the binary
// built from cmd/walkeeper) on one S3 storage root (internal/testkit/s3test, behind an
// s3test.Gate that holds one chosen request so a merge is caught at an exact step, not by
// sleeping) and a real Temporal dev server, only through the `temporal` CLI (reset to each
// kind of point, running and finished; terminate; cancel; signal with garbage) and the SDK
// client, as an operator would. After every action it checks, on the case's own store:
// every acknowledged row is readable with its newest value (the reliability oracle), no
// workflow task of any run failed with non-determinism, the next merge drains the store to
// zero pending, and no staged run (data/m-*) is left that the base does not reference.
// docs/OPERATIONS.md ("What each Temporal Web action does to a merge") is what it proves.
//
// `go test -short` skips the package.
package operator
