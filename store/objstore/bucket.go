package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// ObjectInfo describes one stored object as returned by List.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// backend is one storage implementation behind Bucket: file.go (file://, native),
// mem.go (mem://, native, sorted in memory) and gocloud.go (s3://, gs://,
// azblob:// through gocloud.dev/blob).
//
// REQUIRES (every method): key or prefix already passed CheckKey or checkPrefix; ctx is
// not nil and was not done when the call began. Bucket checks all three, and that the
// handle is open, before it calls a backend.
//
// A backend reports absence and lost races with ErrNotFound and ErrAlreadyExists
// (errors.Is), and never shows a temp name (tempPrefix) as an object or directory.
type backend interface {
	// get returns the object's bytes, ErrNotFound if absent (a "directory" is absent). With
	// limit >= 0 it reads at most limit+1 bytes and fails with ErrTooLarge for an
	// object longer than limit (without reading it when the storage reports its size).
	// alloc, when not nil, provides the buffer the bytes are read into (backends that
	// hold objects in memory copy them instead). wd, when not nil, hears of the bytes read
	// (backends whose reads can stall on a network report them).
	get(ctx context.Context, key string, limit int64, alloc Alloc, wd *watchdog) ([]byte, error)
	// put stores data under key, replacing atomically: readers see old or new bytes. With
	// ifAbsent it creates key only if no object is stored under it: of racing callers,
	// exactly one succeeds and the others get ErrAlreadyExists.
	put(ctx context.Context, key string, data []byte, ifAbsent bool, wd *watchdog) error
	// putFrom is put for an object streamed by write; nothing is published unless write
	// returns nil and the upload completes. It returns the bytes written.
	putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error)
	// exists reports whether an object is stored under key.
	exists(ctx context.Context, key string) (bool, error)
	// delete removes the object; an absent one, or a "directory" name, is not an error.
	delete(ctx context.Context, key string) error
	// list calls fn for every object whose key starts with prefix (recursive), in no
	// particular order, streaming page by page; an error from fn stops the listing.
	list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// listFrom calls fn for every object whose key starts with prefix and sorts after
	// startAfter ("" = from the first), in key order (bytewise, which is UTF-8 binary order,
	// the order S3, GCS and Azure list in), streaming; an error from fn stops the listing.
	// The listing starts at startAfter where the storage can (S3 StartAfter, GCS
	// StartOffset, Azure startFrom, mem:// and file:// natively), so a caller that stops
	// after n objects pays for about n, not for the prefix (docs/STORAGE.md §6).
	listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error
	// listDirs calls fn for the name of every immediate "sub-directory" under prefix
	// ("" or ending in "/"), in no particular order; directories holding no object do
	// not count.
	listDirs(ctx context.Context, prefix string, fn func(name string) error) error
	// close releases the backend's resources. Called once, by Bucket.Close.
	close() error
}

// Bucket is the engine's only storage access. Keys use "/" separators.
//
// Key rules (checked on every backend so a key that works on one works on all, ErrInvalidInput
// otherwise): 1..1024 bytes of valid UTF-8, no control characters or backslashes, no leading
// or trailing "/", no empty, "." or ".." segments, segments at most 255 bytes, and no segment
// starting with ".tmp-" (reserved for the file:// backend's temp files). A key must not also
// be the "directory" of another key ("a" and "a/b"): object stores allow it, a filesystem
// cannot, so the layout must never do it. See keys.go.
//
// s3://, gs:// and azblob:// go through gocloud.dev/blob; file:// is implemented directly on
// the local filesystem and mem:// directly in memory (file.go and mem.go say
// why). The semantics every backend must share are
// the conformance suite in internal/testkit/bucketconformance.
type Bucket struct {
	core   *bucketCore
	faults Faults        // nil = none (WithFaults)
	stall  time.Duration // 0 = DefaultStallTimeout (WithStallTimeout)
}

// bucketCore is the state shared by a Bucket and the fault-injecting views made from it.
type bucketCore struct {
	url    string
	be     backend
	closed atomic.Bool
}

// OpenBucket opens file://, mem://, s3://, gs:// and azblob:// URLs.
//
// file:// URLs are opened with metadata=skip and create_dir=1 (no ".attrs" sidecar files;
// the root directory is created when missing). The host must be empty, "localhost" or "."
// (relative path, as in gocloud); any other host is rejected because gocloud would silently
// ignore it. file:// also accepts "nosync=1": writes skip fsync of files and directories.
// Atomicity (rename, link) is unchanged, only durability across a power loss or kernel crash
// is given up; it exists so tests and throwaway dev data do not pay ~ms per write.
// mem:// buckets with the same URL string in one process are the same bucket.
func OpenBucket(ctx context.Context, rawURL string) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	var be backend
	switch u.Scheme {
	case "file":
		be, err = openFileBackend(ctx, rawURL, u)
	case "mem":
		be, err = openMemBackend(rawURL, u)
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return nil, invalidf("storage url %q: no bucket name (want %s://BUCKET)", rawURL, u.Scheme)
		}
		be, err = openGocloudBackend(ctx, rawURL)
	default:
		return nil, invalidf("storage url %q: unsupported scheme %q (want file, mem, s3, gs or azblob)", rawURL, u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	return &Bucket{core: &bucketCore{url: rawURL, be: be}}, nil
}

// URL returns the URL the bucket was opened with.
func (b *Bucket) URL() string {
	if b == nil || b.core == nil {
		return ""
	}
	return b.core.url
}

// Close releases the bucket. Every handle made by WithFaults shares the same state and is
// closed with it; later calls return ErrClosed. Closing twice is not an error.
func (b *Bucket) Close() error {
	if b == nil || b.core == nil {
		return nil
	}
	if b.core.closed.Swap(true) {
		return nil
	}
	return b.core.be.close()
}

// WithFaults returns a view of the same bucket whose every operation goes through f
// (nil f = no faults). The original handle is unaffected. Faults do not stack: the view
// has f alone, whatever view b itself is.
func (b *Bucket) WithFaults(f Faults) *Bucket {
	if b == nil {
		return nil
	}
	return &Bucket{core: b.core, faults: f, stall: b.stall}
}

// Alloc returns an empty buffer of capacity at least n for the bytes of one read, so that a
// caller that budgets memory reads into memory it charged; an error fails the read. A nil
// Alloc means the Go heap.
type Alloc func(n int) ([]byte, error)

// Get returns the object's bytes; ErrNotFound if absent.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.getLimit(ctx, key, -1, nil)
}

// GetAtMost is Get for an object that must not be longer than limit bytes (limit >= 0):
// a longer one fails with ErrTooLarge after at most limit+1 bytes were read, so a reader
// that reserved memory for the size a manifest declares never holds more than that. The
// bytes are read into a buffer of alloc (nil = the Go heap).
func (b *Bucket) GetAtMost(ctx context.Context, key string, limit int64, alloc Alloc) ([]byte, error) {
	if limit < 0 {
		return nil, wrapOp(OpGet, key, invalidf("negative read limit %d", limit))
	}
	return b.getLimit(ctx, key, limit, alloc)
}

func (b *Bucket) getLimit(ctx context.Context, key string, limit int64, alloc Alloc) ([]byte, error) {
	var data []byte
	err := b.do(ctx, OpGet, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		var err error
		data, err = be.get(ctx, key, limit, alloc, wd)
		return err
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Put stores data under key, replacing any previous object. Readers see the old or the new
// bytes, never a mix: object stores replace atomically, and file:// writes a temp file in the
// target directory, fsyncs it, renames it over the key and fsyncs the directory.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	return b.do(ctx, OpPut, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.put(ctx, key, data, false, wd)
	})
}

// PutFrom is Put for an object produced by write, streamed to storage instead of assembled
// in memory first: a merge's output run is as large as its input, and holding both at once
// is what the merge budget could not account for. The publication is as atomic as Put's
// (file://: temp file, fsync, rename; object stores: the upload only lands on a clean
// close), so an error from write, or a cancelled ctx, leaves the previous object or none.
// It is the same operation as Put for fault injection (OpPut). It returns the bytes written.
func (b *Bucket) PutFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	var n int64
	err := b.do(ctx, OpPut, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		var err error
		n, err = be.putFrom(ctx, key, func(w io.Writer) error {
			wd.pause() // until the first Write: the writer is the caller's code
			defer wd.progress()
			return write(stallWriter{w, wd})
		})
		return err
	})
	return n, err
}

// PutIfAbsent is the commit primitive: exactly one of many racing callers (goroutines or OS
// processes) succeeds; the others get ErrAlreadyExists and the winner's bytes stay intact.
//
//   - file://: write a temp file in the key's directory, fsync it, os.Link(tmp, final) —
//     link(2) fails with EEXIST atomically if the name exists, across processes — remove the
//     temp name and fsync the directory. Hard links must be supported by the filesystem.
//   - mem://: checked and applied under the bucket's mutex (mem.go).
//   - s3/gs/azblob: gocloud IfNotExist (S3 If-None-Match: *, GCS DoesNotExist precondition,
//     Azure If-None-Match: *). S3's 409 ConditionalRequestConflict (two conditional writes in
//     flight) is retried a few times: the retry then either wins or sees 412.
//
// Any error other than ErrAlreadyExists leaves the outcome unknown (the object may have
// landed); callers re-read the key to find out.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return b.do(ctx, OpPutIfAbsent, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.put(ctx, key, data, true, wd)
	})
}

// Exists reports whether an object is stored under key.
func (b *Bucket) Exists(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := b.do(ctx, OpExists, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		var err error
		ok, err = be.exists(ctx, key)
		return err
	})
	if err != nil {
		return false, err
	}
	return ok, nil
}

// Delete removes the object; an absent object is not an error, so clean-up can be retried.
// On file:// the directories left empty are removed too, so ListDirs answers the same as on
// an object store (which has no directories at all).
func (b *Bucket) Delete(ctx context.Context, key string) error {
	return b.do(ctx, OpDelete, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.delete(ctx, key)
	})
}

// List returns every object whose key starts with prefix (a plain string prefix, recursive,
// "" = everything), sorted by key. Temp files never appear.
func (b *Bucket) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := b.Walk(ctx, prefix, func(o ObjectInfo) error {
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ListDirs returns the sorted names (without prefix or trailing "/") of the immediate
// "sub-directories" under prefix, i.e. the distinct first segments of the keys below it
// that have more segments after them (delimiter "/"). prefix names a directory: a non-empty
// prefix without a trailing "/" gets one. On file:// a directory holding no object (only
// temp files or nothing) is not reported, matching object stores.
func (b *Bucket) ListDirs(ctx context.Context, prefix string) ([]string, error) {
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var out []string
	err := b.do(ctx, OpListDirs, prefix, checkPrefix, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.listDirs(ctx, prefix, callerFn(wd, func(name string) error {
			out = append(out, name)
			return nil
		}))
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// do runs one operation on the backend after the handle and input checks, between the
// view's Faults.Before and Faults.After, and adds the operation and key to the error.
// Invalid input is reported before the hook, so faults only see real calls; a context
// already done reaches no backend. The operation, faults included, runs under a context
// that the stall timeout cancels once the storage makes no progress for that long
// (stall.go): a request the server never answers fails with ErrStalled instead of holding
// its caller for ever.
func (b *Bucket) do(ctx context.Context, op, key string, check func(string) error, fn func(context.Context, backend, *watchdog) error) error {
	if b == nil || b.core == nil || b.core.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return wrapOp(op, key, invalidf("nil context"))
	}
	if err := check(key); err != nil {
		return wrapOp(op, key, err)
	}
	sctx, wd, stop := watch(ctx, b.StallTimeout())
	defer stop()
	return wrapOp(op, key, wd.explain(ctx, b.run(sctx, op, key, wd, fn)))
}

// run is do's call of the backend between the faults.
func (b *Bucket) run(ctx context.Context, op, key string, wd *watchdog, fn func(context.Context, backend, *watchdog) error) error {
	call := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(ctx, b.core.be, wd)
	}
	if b.faults == nil {
		return call()
	}
	if cf, ok := b.faults.(ContextFaults); ok {
		if err := cf.BeforeContext(ctx, op, key); err != nil {
			return err
		}
	}
	if err := b.faults.Before(op, key); err != nil {
		return err
	}
	return b.faults.After(op, key, call())
}

// wrapOp adds the operation and key to err, keeping the sentinel for errors.Is.
func wrapOp(op, key string, err error) error {
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("blob %s %q: %w", op, key, err)
}

// countingWriter counts the bytes a streamed put writes.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// readSized reads r to EOF into a buffer of size bytes, the length the storage reported:
// ReadAll without a hint doubles its way up and allocates about twice the object.
// A reader that turns out longer or shorter than reported still yields all of its bytes.
//
// The buffer comes from alloc when it is not nil (a budgeted merge reads into memory its
// account charged), else from the Go heap.
//
// With limit >= 0, an object reported or found longer than limit fails with
// ErrTooLarge, and neither the buffer nor the bytes read exceed limit+1.
func readSized(r io.Reader, size, limit int64, alloc Alloc) ([]byte, error) {
	if limit >= 0 {
		if size > limit {
			return nil, fmt.Errorf("%w: %d bytes stored, at most %d expected", ErrTooLarge, size, limit)
		}
		r = io.LimitReader(r, limit+1)
	}
	if size < 0 || size > 1<<40 {
		size = 0
	}
	// One spare byte lets the read observe EOF without growing a full buffer.
	buf := make([]byte, 0, size+1)
	if alloc != nil {
		var err error
		if buf, err = alloc(int(size + 1)); err != nil {
			return nil, err
		}
	}
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if limit >= 0 && int64(len(buf)) > limit {
			return nil, fmt.Errorf("%w: more than the %d bytes expected", ErrTooLarge, limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, mapErr(err)
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // longer than reported: let append pick the growth
		}
	}
}
