package objstore

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
)

// Checks of what the gs:// and azblob:// drivers hand on from a server's answer, which they
// read as a well-behaved server would send it.

// errBadAnswer marks an answer of the storage its driver failed on; only a broken or hostile
// server gives one, so the failure is the storage's, like errBadListing.
var errBadAnswer = errors.New("storage answered a malformed response")

// recoverDriver, deferred, turns a panic of a driver called on this goroutine into
// errBadAnswer in *err: azureblob dereferences headers a server may leave out (a GET's
// Last-Modified, a HEAD's x-ms-creation-time), and the panic would end the process.
func recoverDriver(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: the storage driver failed on it: %v", errBadAnswer, r)
	}
}

// newReader is bkt.NewReader with a panic of the driver turned into an error.
func (g *gocloudBackend) newReader(ctx context.Context, key string) (r *blob.Reader, err error) {
	defer recoverDriver(&err)
	return g.bkt.NewReader(ctx, key, nil)
}

// existsChecked is bkt.Exists with a panic of the driver turned into an error.
func (g *gocloudBackend) existsChecked(ctx context.Context, key string) (ok bool, err error) {
	defer recoverDriver(&err)
	return g.bkt.Exists(ctx, key)
}

// checkGCSAzureOrder is checkS3Order for GCS and Azure entries, whose servers list names in
// bytewise order too, and whose drivers likewise sort a page's names and prefixes together.
func checkGCSAzureOrder(obj *blob.ListObject, lastKey, lastDir *string) error {
	var gcs storage.ObjectAttrs
	var azBlob container.BlobItem
	var azDir container.BlobPrefix
	var name string
	var last *string
	switch {
	case obj.As(&gcs) && gcs.Prefix != "":
		name, last = gcs.Prefix, lastDir
	case obj.As(&gcs):
		name, last = gcs.Name, lastKey
	case obj.As(&azBlob):
		name, last = ptrString(azBlob.Name), lastKey
	case obj.As(&azDir):
		name, last = ptrString(azDir.Name), lastDir
	default:
		return nil // a driver without these types (none but S3, checked before)
	}
	if *last != "" && name <= *last {
		return fmt.Errorf("%w: %q listed after %q", errBadListing, name, *last)
	}
	*last = name
	return nil
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
