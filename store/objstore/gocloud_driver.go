package objstore

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/blob"
)

// Checks of what the gs:// and azblob:// drivers hand on from a server's answer, which they
// read as a well-behaved server would send it.

// errBadAnswer marks an answer of the storage its driver failed on; only a broken or hostile
// server gives one, so the failure is the storage's, like errBadListing.
var errBadAnswer = errors.New("storage answered a malformed response")

// recoverDriver, deferred, turns a panic of a driver called on this goroutine into kind
// (errBadAnswer, errBadListing) in *err: azureblob dereferences headers a server may leave
// out (a GET's Last-Modified, a HEAD's x-ms-creation-time), and the panic would end the process.
func recoverDriver(err *error, kind error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: the storage driver failed on it: %v", kind, r)
	}
}

// newReader is bkt.NewReader with a panic of the driver turned into an error, its context
// marked as one read's, so that a gs:// bucket bounds the read's reopenings (gcsRead).
func (g *gocloudBackend) newReader(ctx context.Context, key string) (r *blob.Reader, err error) {
	defer recoverDriver(&err, errBadAnswer)
	return g.bkt.NewReader(context.WithValue(ctx, gcsReadKey{}, new(gcsRead)), key, nil)
}

// exists is bkt.Exists with a panic of the driver turned into an error.
func (g *gocloudBackend) exists(ctx context.Context, key string) (ok bool, err error) {
	defer recoverDriver(&err, errBadAnswer)
	return g.bkt.Exists(ctx, key)
}
