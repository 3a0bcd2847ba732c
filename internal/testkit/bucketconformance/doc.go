// Package bucketconformance is the contract every storage backend behind objstore.Bucket must
// keep, as a test suite any package can run against any bucket it can open: file://, mem://,
// the in-process S3 server of internal/testkit/s3test, or a real S3, GCS or Azure endpoint and the
// servers that imitate them (MinIO, versitygw, fake-gcs-server, Azurite).
//
// Everything above store/ assumes identical keys and semantics on every backend, so the
// backends must not drift apart; this suite is what keeps them together.
//
//   - Run: the single-handle contract (keys, round trips, overwrite, put-if-absent,
//     idempotent delete, sorted recursive and delimiter listings across pages, invalid keys,
//     context and close, atomic replace under concurrent readers, the fault hook).
//   - RaceGoroutines: exactly one winner per key among goroutines sharing one handle.
//   - RaceProcesses and RaceChild: exactly one winner per key among OS processes, each with
//     its own handle, connection pool and SDK state, as separate workers have.
//   - Both races check that the race happened: every racer lost every key it did not win,
//     and no racer won more than MaxWinShare of the keys.
//
// It is a test harness: only _test.go files may import it.
package bucketconformance
