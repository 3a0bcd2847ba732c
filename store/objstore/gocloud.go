package objstore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// gocloudBackend serves s3://, gs:// and azblob:// through gocloud.dev/blob.
type gocloudBackend struct {
	bkt *blob.Bucket
}

func openGocloudBackend(ctx context.Context, rawURL string, u *url.URL) (*gocloudBackend, error) {
	if err := checkGocloudParams(u); err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	bkt, err := gocloudMux.OpenBucket(ctx, rawURL)
	if err != nil {
		// The openers only parse the URL and load the configuration it names; no request
		// reaches the bucket, so every error is the operator's.
		msg := strings.TrimPrefix(err.Error(), "open bucket "+u.String()+": ")
		return nil, invalidf("storage url %q: %s", rawURL, msg)
	}
	return &gocloudBackend{bkt: bkt}, nil
}

// gocloudMux opens s3://, gs:// and azblob:// URLs as blob.DefaultURLMux does (the prefix and
// key parameters too), but through walkeeper's openers, whose clients check the storage's
// answers: s3Opener (gocloud_s3answers.go), gcsOpener and azOpener.
var gocloudMux = func() *blob.URLMux {
	m := new(blob.URLMux)
	m.RegisterBucket(s3blob.Scheme, s3Opener{})
	m.RegisterBucket(gcsblob.Scheme, &gcsOpener{openers: map[string]*gcsblob.URLOpener{}})
	m.RegisterBucket(azureblob.Scheme, &azOpener{})
	return m
}()

// checkGocloudParams refuses the values gocloud accepts at open but that fail only at the
// first request, far from the flag that set them.
func checkGocloudParams(u *url.URL) error {
	q := u.Query()
	if u.Scheme == "s3" && q.Has("endpoint") {
		e, err := url.Parse(q.Get("endpoint"))
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return fmt.Errorf("endpoint %q: want http://HOST[:PORT] or https://HOST[:PORT]", q.Get("endpoint"))
		}
	}
	if u.Scheme == "s3" && q.Has("awssdk") && q.Get("awssdk") != "v2" {
		// gocloud ignores the parameter; a v1 asked for is an SDK this build does not have.
		return fmt.Errorf("awssdk %q: this build has only v2", q.Get("awssdk"))
	}
	if param, on := gcsOverGRPC(q); u.Scheme == "gs" && on {
		return fmt.Errorf("%s=%s: gs:// is served over the JSON API only", param, q.Get(param))
	}
	return nil
}

func (g *gocloudBackend) close() error { return g.bkt.Close() }

// get reads the object into a buffer sized from the length the storage reports (readSized).
func (g *gocloudBackend) get(ctx context.Context, key string, limit int64, alloc Alloc, wd *watchdog) ([]byte, error) {
	r, err := g.newReader(ctx, key)
	if err != nil {
		return nil, mapErr(err)
	}
	defer r.Close()
	wd.progress() // the storage answered
	return readSized(progressReader{r, wd}, r.Size(), limit, alloc)
}

func (g *gocloudBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	// Cancelling the upload's context before the driver sees EOF is gocloud's documented
	// way to abandon an upload, so a failed write never publishes a prefix.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The bytes go through a pipe into Bucket.Upload (the driver reads them), not through
	// Writer.Write: see put for why.
	pr, pw := io.Pipe()
	cw := &countingWriter{w: pw}
	done := make(chan error, 1)
	go func() {
		err := write(cw)
		if err != nil {
			cancel() // abandon the upload before the driver reads EOF
		}
		_ = pw.CloseWithError(err)
		done <- err
	}()
	uerr := g.bkt.Upload(wctx, key, pr, writerOpts(false))
	// INVARIANT: write has returned or will, now: a write blocked on a pipe nobody reads
	// gets errUploadEnded.
	_ = pr.CloseWithError(errUploadEnded)
	if err := <-done; err != nil && (uerr == nil || !errors.Is(err, errUploadEnded)) {
		return 0, err
	}
	if uerr != nil {
		return 0, mapErr(uerr)
	}
	return cw.n, nil
}

// put with ifAbsent writes with gocloud's IfNotExist (see Bucket.PutIfAbsent) and retries S3's
// 409 ConditionalRequestConflict a few times with backoff.
func (g *gocloudBackend) put(ctx context.Context, key string, data []byte, ifAbsent bool, wd *watchdog) error {
	for attempt := 0; ; attempt++ {
		// Bucket.Upload, never Writer.Write: gocloud v0.47.0's azureblob writer panics whenever
		// an upload through Write fails, as every lost commit race does (docs/STORAGE.md §4).
		r := progressReader{bytes.NewReader(data), wd}
		err := mapErr(g.bkt.Upload(ctx, key, r, writerOpts(ifAbsent)))
		if err == nil || !ifAbsent || !isConditionalConflict(err) || attempt >= 4 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
		}
	}
}

func (g *gocloudBackend) delete(ctx context.Context, key string) error {
	err := mapErr(g.bkt.Delete(ctx, key))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// list hands each object of gocloud's paged listing to fn as its page arrives.
func (g *gocloudBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return g.listFrom(ctx, prefix, "", fn)
}

// listDirs is a delimiter ("/") listing: object stores report each common prefix once.
func (g *gocloudBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	return g.eachListed(ctx, &blob.ListOptions{Prefix: prefix, Delimiter: "/"}, "", func(obj *blob.ListObject) error {
		if !obj.IsDir {
			return nil
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/")
		if name == "" || strings.HasPrefix(name, tempPrefix) {
			return nil
		}
		return fn(name)
	})
}

// eachListed runs one gocloud listing page by page, from after startAfter ("" = the start;
// startListAfter), handing every entry to fn as its page arrives, until the listing ends or
// fn or the storage fails. An entry outside the prefix fails the listing, as does a stored key
// or prefix not after the one of its kind before it: a server that repeats a page (a
// continuation token that never advances) would otherwise make a listing endless, and one
// that lists out of order or twice breaks every cursor. Each S3 page is bounded and checked
// as it arrives (guardS3Listing), and the empty pages in a row are bounded (emptyPages).
func (g *gocloudBackend) eachListed(ctx context.Context, opts *blob.ListOptions, startAfter string,
	fn func(*blob.ListObject) error) error {
	empty := &emptyPages{}
	ctx = context.WithValue(ctx, emptyPagesKey{}, empty)
	opts.BeforeList = func(as func(any) bool) error {
		if err := empty.requested(); err != nil {
			return err
		}
		guardS3Listing(as)
		if startAfter != "" {
			startListAfter(as, startAfter)
		}
		return nil
	}
	it := g.bkt.List(opts)
	var lastKey, lastDir string
	for {
		obj, err := nextListed(ctx, it)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return mapErr(err)
		}
		empty.entry()
		if !strings.HasPrefix(obj.Key, opts.Prefix) {
			return fmt.Errorf("%w: key %q outside the prefix", errBadListing, obj.Key)
		}
		if err := checkListedOrder(obj, &lastKey, &lastDir); err != nil {
			return err
		}
		if err := fn(obj); err != nil {
			return err
		}
	}
}

// checkListedOrder fails an entry whose stored name is not after the last one of its kind:
// S3, GCS and Azure list in byte order of those names, and the drivers sort a page's keys and
// prefixes together (S3's by their unescaped names), so only each kind keeps the server's order.
func checkListedOrder(obj *blob.ListObject, lastKey, lastDir *string) error {
	name, dir, ok := storedName(obj)
	if !ok {
		return nil // a driver of none of these types (no other is registered)
	}
	last := lastKey
	if dir {
		last = lastDir
	}
	if *last != "" && name <= *last {
		return fmt.Errorf("%w: %q listed after %q", errBadListing, name, *last)
	}
	*last = name
	return nil
}

// storedName is obj's name as its server stored and ordered it, and whether it is a prefix
// (a directory of a delimiter listing). Pure.
func storedName(obj *blob.ListObject) (name string, dir, ok bool) {
	var s3Key types.Object
	var s3Dir types.CommonPrefix
	var gcs storage.ObjectAttrs
	var azKey container.BlobItem
	var azDir container.BlobPrefix
	switch {
	case obj.As(&s3Key):
		return aws.ToString(s3Key.Key), false, true
	case obj.As(&s3Dir):
		return aws.ToString(s3Dir.Prefix), true, true
	case obj.As(&gcs):
		return cmp.Or(gcs.Prefix, gcs.Name), gcs.Prefix != "", true
	case obj.As(&azKey):
		return aws.ToString(azKey.Name), false, true
	case obj.As(&azDir):
		return aws.ToString(azDir.Name), true, true
	}
	return "", false, false
}

// nextListed is it.Next with a panic of the driver turned into an error: gocloud's s3blob
// dereferences parts of a listing answer that a server may leave out (a key's LastModified).
func nextListed(ctx context.Context, it *blob.ListIterator) (obj *blob.ListObject, err error) {
	defer recoverDriver(&err, errBadListing)
	return it.Next(ctx)
}

// errBadListing marks a listing answer no S3-compatible server should give; the failure is
// the storage's, like any unclassified storage error.
var errBadListing = errors.New("storage answered a malformed listing")

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

// errUploadEnded is what a putFrom writer sees when the upload ended before it finished.
var errUploadEnded = errors.New("store: upload ended before the writer finished")

func writerOpts(ifNotExist bool) *blob.WriterOptions {
	return &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: ifNotExist}
}
