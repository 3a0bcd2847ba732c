package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	// The storage schemes served through gocloud. Importing the drivers registers their URL
	// openers on blob.DefaultURLMux, which is what makes OpenBucket("s3://...") work.
	// fileblob is registered too: openFileBackend opens the root through it to validate
	// the URL's parameters, even though file:// objects never go through it.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)

// gocloudBackend serves mem://, s3://, gs:// and azblob:// through gocloud.dev/blob.
type gocloudBackend struct {
	bkt    *blob.Bucket
	shared bool // mem://: bkt belongs to the process-global registry; never close it
}

// memBuckets is the process-global registry of mem:// buckets, keyed by the full URL string,
// so that several DB handles opened on "mem://x" in one process (typically one test) see the
// same objects, like several processes sharing one real bucket. Entries live for the whole
// process: closing a handle does not drop the data, so a close-and-reopen test still finds it.
var memBuckets = struct {
	sync.Mutex
	m map[string]*blob.Bucket
}{m: map[string]*blob.Bucket{}}

func openMemBackend(ctx context.Context, rawURL string) (*gocloudBackend, error) {
	memBuckets.Lock()
	defer memBuckets.Unlock()
	bkt := memBuckets.m[rawURL]
	if bkt == nil {
		var err error
		bkt, err = blob.OpenBucket(ctx, rawURL)
		if err != nil {
			return nil, invalidf("open %q: %v", rawURL, err)
		}
		memBuckets.m[rawURL] = bkt
	}
	return &gocloudBackend{bkt: bkt, shared: true}, nil
}

func openGocloudBackend(ctx context.Context, rawURL string) (*gocloudBackend, error) {
	bkt, err := blob.OpenBucket(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("open bucket %q: %w", rawURL, err)
	}
	return &gocloudBackend{bkt: bkt}, nil
}

func (g *gocloudBackend) close() error {
	if g.shared {
		return nil
	}
	return g.bkt.Close()
}

// get reads the object into one buffer sized from the object's length (readSized).
func (g *gocloudBackend) get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := g.bkt.NewReader(ctx, key, nil)
	if err != nil {
		return nil, mapErr(err)
	}
	defer r.Close()
	return readSized(ctx, r, r.Size())
}

func (g *gocloudBackend) put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return mapErr(g.bkt.WriteAll(ctx, key, data, writerOpts(false)))
}

func (g *gocloudBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// Cancelling the writer's context before Close is gocloud's documented way to
	// abandon an upload, so a failed write never publishes a prefix.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := g.bkt.NewWriter(wctx, key, writerOpts(false))
	if err != nil {
		return 0, mapErr(err)
	}
	cw := &countingWriter{w: w}
	if err := write(cw); err != nil {
		cancel()
		_ = w.Close()
		return 0, err
	}
	return cw.n, mapErr(w.Close())
}

// putIfAbsent writes with gocloud's IfNotExist: S3 If-None-Match: * (also on the
// CompleteMultipartUpload of objects large enough for the SDK's multipart upload), the GCS
// DoesNotExist precondition, Azure If-None-Match: *, and mem:// under the bucket's mutex.
// S3's 409 ConditionalRequestConflict (two conditional writes of one key in flight) is
// retried a few times with backoff: the retry then either wins or sees 412.
func (g *gocloudBackend) putIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		err := mapErr(g.bkt.WriteAll(ctx, key, data, writerOpts(true)))
		if err == nil || !isConditionalConflict(err) || attempt >= 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
}

func (g *gocloudBackend) exists(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return g.bkt.Exists(ctx, key)
}

func (g *gocloudBackend) delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := mapErr(g.bkt.Delete(ctx, key))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// list follows gocloud's paged listing (continuation tokens) and hands each object to fn as
// its page arrives.
func (g *gocloudBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	it := g.bkt.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return mapErr(err)
		}
		if obj.IsDir || isTempKey(obj.Key) {
			continue
		}
		if err := fn(ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime}); err != nil {
			return err
		}
	}
}

// listDirs is a delimiter ("/") listing: object stores report each common prefix once.
func (g *gocloudBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	it := g.bkt.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return mapErr(err)
		}
		if !obj.IsDir {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/")
		if name == "" || strings.HasPrefix(name, tempPrefix) {
			continue
		}
		if err := fn(name); err != nil {
			return err
		}
	}
}

// mapErr converts gocloud error codes into the store's sentinels.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	case gcerrors.FailedPrecondition:
		// The only precondition we ever set is IfNotExist.
		return fmt.Errorf("%w: %v", ErrAlreadyExists, err)
	}
	return err
}

// isConditionalConflict reports S3's 409 ConditionalRequestConflict, which gocloud maps to
// Unknown. The interface matches smithy.APIError without importing the AWS SDK here.
func isConditionalConflict(err error) bool {
	var ae interface{ ErrorCode() string }
	return errors.As(err, &ae) && ae.ErrorCode() == "ConditionalRequestConflict"
}

func writerOpts(ifNotExist bool) *blob.WriterOptions {
	return &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: ifNotExist}
}
