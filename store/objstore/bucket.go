package objstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
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

// backend is one storage implementation behind Bucket: file.go, mem.go and gocloud.go.
// REQUIRES (every method): key or prefix passed CheckKey or checkPrefix, ctx is live and the
// handle open (Bucket checks all three). A backend reports absence and lost races with
// ErrNotFound and ErrAlreadyExists and never shows a temp name (tempPrefix).
type backend interface {
	// get returns the object's bytes, ErrNotFound if absent. With limit >= 0 an object longer
	// than limit fails with ErrTooLarge after at most limit+1 bytes; alloc, when not nil,
	// provides the buffer, and wd, when not nil, hears of the bytes read.
	get(ctx context.Context, key string, limit int64, alloc Alloc, wd *watchdog) ([]byte, error)
	// put replaces atomically; with ifAbsent exactly one of racing callers succeeds and the
	// others get ErrAlreadyExists.
	put(ctx context.Context, key string, data []byte, ifAbsent bool, wd *watchdog) error
	// putFrom is put for an object streamed by write; nothing is published unless write
	// returns nil and the upload completes.
	putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error)
	// exists reports whether an object is stored under key.
	exists(ctx context.Context, key string) (bool, error)
	// delete removes the object; an absent one, or a "directory" name, is not an error.
	delete(ctx context.Context, key string) error
	// list calls fn for every object under prefix (recursive), in key order, which Walk
	// promises its callers.
	list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// listFrom calls fn for every object under prefix after startAfter, in bytewise key
	// order, starting the listing there where the storage can, so a caller that stops after
	// n objects pays for about n (docs/STORAGE.md §6).
	listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error
	// listDirs calls fn for every immediate "sub-directory" under prefix that holds an
	// object, in no particular order.
	listDirs(ctx context.Context, prefix string, fn func(name string) error) error
	close() error
}

// Bucket is the engine's only storage access. Keys use "/" separators and follow the same
// rules on every backend (keys.go); the semantics every backend shares are the conformance
// suite in internal/testkit/bucketconformance.
type Bucket struct {
	core   *bucketCore
	faults Faults        // nil = none (WithFaults)
	stall  time.Duration // <= 0 = DefaultStallTimeout (WithStallTimeout)
	// refused hears of each operation failed on an answer walkeeper refused (nil = nobody;
	// WithRefusedAnswers).
	refused func(reason string)
}

// bucketCore is the state shared by a Bucket and the fault-injecting views made from it.
type bucketCore struct {
	url    string
	be     backend
	closed atomic.Bool
}

// OpenBucket opens file://, mem://, s3://, gs:// and azblob:// URLs. A file:// host must be
// empty, "localhost" or "." because gocloud would silently ignore any other, and "nosync=1"
// skips fsync (tests and throwaway dev data); mem:// buckets with the same URL in one process
// are the same bucket. Every URL it refuses is ErrInvalidInput.
func OpenBucket(ctx context.Context, rawURL string) (*Bucket, error) {
	return openBucket(ctx, rawURL, createRoot)
}

// OpenExistingBucket opens rawURL as OpenBucket does, but a file:// root that does not exist,
// or is not a directory, is ErrInvalidInput instead of being created: the open of a command
// that reads the storage or changes stores in it, where a missing root is a mistyped URL.
// A mem:// bucket is made as by OpenBucket: nothing outlives the process.
func OpenExistingBucket(ctx context.Context, rawURL string) (*Bucket, error) {
	return openBucket(ctx, rawURL, existingRoot)
}

func openBucket(ctx context.Context, rawURL string, mode rootMode) (*Bucket, error) {
	be, err := openBackend(ctx, rawURL, mode)
	if err != nil {
		return nil, err
	}
	return &Bucket{core: &bucketCore{url: rawURL, be: be}}, nil
}

// CheckURL returns the error OpenBucket would return for a URL it refuses, without creating
// a file:// root or a mem:// bucket, so that a process refuses a bad --storage before it dials
// anything.
func CheckURL(ctx context.Context, rawURL string) error {
	be, err := openBackend(ctx, rawURL, checkOnly)
	if err != nil {
		return err
	}
	return be.close()
}

// rootMode is what opening a backend does about a file:// root or a mem:// bucket.
type rootMode int

const (
	checkOnly    rootMode = iota // check the URL only; the backend serves nothing but close
	createRoot                   // create the root when it does not exist
	existingRoot                 // refuse a root that does not exist
)

// openBackend opens rawURL's backend as mode says.
func openBackend(ctx context.Context, rawURL string, mode rootMode) (backend, error) {
	u, err := url.Parse(rawURL)
	if err == nil {
		// url.Query and gocloud's openers drop a pair that does not decode: an endpoint with
		// a stray % would quietly become the provider's default.
		_, err = url.ParseQuery(u.RawQuery)
	}
	if err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	switch u.Scheme {
	case "file":
		return openFileBackend(rawURL, u, mode)
	case "mem":
		return openMemBackend(rawURL, u, mode != checkOnly)
	case "s3", "gs", "azblob":
		if u.Host == "" {
			return nil, invalidf("storage url %q: no bucket name (want %s://BUCKET)", rawURL, u.Scheme)
		}
		return openGocloudBackend(ctx, rawURL, u)
	}
	return nil, invalidf("storage url %q: unsupported scheme %q (want file, mem, s3, gs or azblob)", rawURL, u.Scheme)
}

// URL returns the URL the bucket was opened with.
func (b *Bucket) URL() string {
	if b == nil || b.core == nil {
		return ""
	}
	return b.core.url
}

// Close releases the bucket and every WithFaults view of it; closing twice is not an error.
func (b *Bucket) Close() error {
	if b == nil || b.core == nil || b.core.closed.Swap(true) {
		return nil
	}
	return b.core.be.close()
}

// WithFaults returns a view of the same bucket whose every operation goes through f alone
// (nil = none); the original handle is unaffected.
func (b *Bucket) WithFaults(f Faults) *Bucket {
	if b == nil {
		return nil
	}
	return &Bucket{core: b.core, faults: f, stall: b.stall, refused: b.refused}
}

// Alloc returns an empty buffer of capacity at least n for one read, so that a caller that
// budgets memory reads into memory it charged (nil = the Go heap). A read whose object is
// longer than the storage reported asks again, for a larger buffer it copies into: only the
// last buffer holds the object, the earlier ones are dead once the read returns.
type Alloc func(n int) ([]byte, error)

// Get returns the object's bytes; ErrNotFound if absent.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	return b.getLimit(ctx, key, -1, nil)
}

// GetAtMost is Get for an object of at most limit bytes: a longer one fails with ErrTooLarge
// after at most limit+1 bytes were read, so a reader never holds more than it reserved.
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

// Put stores data under key; readers see the old or the new bytes, never a mix.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	return b.do(ctx, OpPut, key, CheckKey, func(ctx context.Context, be backend, wd *watchdog) error {
		return be.put(ctx, key, data, false, wd)
	})
}

// PutFrom is Put (OpPut, to faults) for an object streamed by write, since a merge's output
// run is as large as its input; an error from write or a cancelled ctx leaves the previous
// object or none. It returns the bytes written.
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
// processes) succeeds, the others get ErrAlreadyExists (file://: link(2) of a synced temp
// file; mem://: under the mutex; object stores: a conditional write, S3's 409 retried).
// Any other error leaves the outcome unknown; callers re-read the key to find out.
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
	return ok && err == nil, err
}

// Delete removes the object; an absent one is not an error, so clean-up can be retried.
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

// ListDirs returns the sorted names of the immediate "sub-directories" under prefix (a
// non-empty prefix without a trailing "/" gets one); file:// reports only directories that
// hold an object, matching object stores.
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

// do runs one operation on the backend after the handle and input checks (so faults only
// see real calls), between the view's faults, under a context the stall timeout cancels
// once the storage makes no progress (stall.go), and adds the operation and key to the error.
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
	sctx, wd, stop := watch(ctx, cmp.Or(max(b.stall, 0), DefaultStallTimeout))
	defer stop()
	return b.tellRefused(wrapOp(op, key, wd.explain(ctx, b.run(sctx, op, key, wd, fn))))
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

// wrapOp adds the operation and key to err, keeping the sentinel for errors.Is, and cuts its
// text at maxErrText (boundErrText), with the server's reason for a refusal (withGCSReason).
func wrapOp(op, key string, err error) error {
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return boundErrText(fmt.Errorf("blob %s %q: %w", op, key, withGCSReason(err)))
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

// readSized reads r to EOF into a buffer of the size the storage reported, from alloc (nil =
// the Go heap), since ReadAll doubles its way to about twice the object; with limit >= 0 a
// longer object fails with ErrTooLarge and no more than limit+1 bytes are read. A body longer
// than reported (a store may report 0 or -1 for a body it then delivers) is read on into
// buffers twice as large (at least readGrowthFloor, at most limit+1) that alloc gives too, so
// every byte a read holds is one alloc provided (Alloc).
func readSized(r io.Reader, size, limit int64, alloc Alloc) ([]byte, error) {
	if limit >= 0 {
		if size > limit {
			return nil, fmt.Errorf("%w: %d bytes stored, at most %d expected", ErrTooLarge, size, limit)
		}
		limit = min(limit, math.MaxInt64-1) // so that limit+1 cannot wrap
		r = io.LimitReader(r, limit+1)
	}
	if size < 0 || size > 1<<40 {
		size = 0
	}
	if alloc == nil {
		alloc = heapAlloc
	}
	// One spare byte lets the read observe EOF without growing a full buffer.
	buf, err := allocAtLeast(alloc, int(size+1))
	if err != nil {
		return nil, err
	}
	for {
		if len(buf) == cap(buf) {
			// REQUIRES: len(buf) <= limit when limit >= 0 (checked below), so the buffer grows.
			want := max(2*cap(buf), readGrowthFloor)
			if limit >= 0 {
				want = int(min(int64(want), limit+1))
			}
			grown, err := allocAtLeast(alloc, want)
			if err != nil {
				return nil, err
			}
			buf = append(grown, buf...) // into grown, which has room
		}
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
	}
}

// readGrowthFloor is the least a read that outgrows its reported size grows to: a body
// reported as 0 bytes would otherwise start from one byte and take about 27 buffers to reach
// 64 MiB, each one an allocation, a charge and a copy.
const readGrowthFloor = 64 << 10

// heapAlloc is the Alloc of a read into the Go heap.
func heapAlloc(n int) ([]byte, error) { return make([]byte, 0, n), nil }

// allocAtLeast is alloc(n), refused when alloc breaks its contract, since a buffer smaller than
// asked would be grown by append on the Go heap, uncharged.
func allocAtLeast(alloc Alloc, n int) ([]byte, error) {
	b, err := alloc(n)
	if err != nil {
		return nil, err
	}
	if cap(b) < n {
		return nil, fmt.Errorf("objstore: a read buffer of %d bytes for %d asked", cap(b), n)
	}
	return b[:0], nil
}
