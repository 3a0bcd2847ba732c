package store

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	// The five storage schemes the store understands. Importing the drivers registers their
	// URL openers on blob.DefaultURLMux, which is what makes OpenBucket("s3://...") work.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)

// Operation names passed to Faults.Before and Faults.After. They are stable so reliability
// tests can target one kind of call (for example only put_if_absent on manifests).
const (
	OpGet         = "get"
	OpPut         = "put"
	OpPutIfAbsent = "put_if_absent"
	OpExists      = "exists"
	OpDelete      = "delete"
	OpList        = "list"      // key = the prefix
	OpListDirs    = "list_dirs" // key = the normalised prefix
)

// tempPrefix starts the name of every temporary file the file:// backend writes next to its
// final object. A key segment may not start with it (ErrInvalidInput), so List, ListDirs,
// Exists and Get can recognise and hide temp files exactly, including ones leaked by a crash.
const tempPrefix = ".tmp-"

const (
	maxKeyBytes     = 1024 // S3's limit; enforced everywhere so a key valid on one backend is valid on all
	maxSegmentBytes = 255  // NAME_MAX of common local filesystems; enforced everywhere for the same reason
)

// ObjectInfo describes one stored object as returned by List.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Faults is the fault-injection hook used by reliability tests. Before runs before the
// operation: a non-nil error is returned to the caller and the operation is NOT performed
// (use it to inject errors or, by sleeping, latency). After runs once the operation has been
// performed, with its result, and returns the error the caller will see: returning an error
// for a successful write models "the write landed but the caller was told it failed", the
// ambiguous outcome every commit path must survive. Implementations must be safe for
// concurrent use. op is one of the Op* constants.
type Faults interface {
	Before(op, key string) error
	After(op, key string, err error) error
}

// FaultFuncs adapts two optional functions to Faults; a nil field passes the call through.
type FaultFuncs struct {
	BeforeFunc func(op, key string) error
	AfterFunc  func(op, key string, err error) error
}

// Before implements Faults.
func (f FaultFuncs) Before(op, key string) error {
	if f.BeforeFunc == nil {
		return nil
	}
	return f.BeforeFunc(op, key)
}

// After implements Faults.
func (f FaultFuncs) After(op, key string, err error) error {
	if f.AfterFunc == nil {
		return err
	}
	return f.AfterFunc(op, key, err)
}

// Bucket is the only storage access in store/. Keys use "/" separators.
//
// Key rules (checked on every backend so a key that works on one works on all, ErrInvalidInput
// otherwise): 1..1024 bytes of valid UTF-8, no control characters or backslashes, no leading
// or trailing "/", no empty, "." or ".." segments, segments at most 255 bytes, and no segment
// starting with ".tmp-" (reserved for the file:// backend's temp files). A key must not also
// be the "directory" of another key ("a" and "a/b"): object stores allow it, a filesystem
// cannot, so the layout must never do it.
//
// All backends go through gocloud.dev/blob except file://, which is implemented directly on
// the local filesystem: gocloud's fileblob checks IfNotExist with stat-then-rename under a
// per-writer mutex, so it is not atomic even inside one process, let alone across processes,
// and it neither fsyncs nor keeps its temp files in the target directory.
type Bucket struct {
	core   *bucketCore
	faults Faults
}

// bucketCore is the state shared by a Bucket and the fault-injecting views made from it.
type bucketCore struct {
	url      string
	bkt      *blob.Bucket // nil never; for file:// only opened to validate the URL and create the root
	fileRoot string       // absolute root directory for file://, "" otherwise
	dirMode  os.FileMode  // directory mode for file:// (dir_file_mode, default 0777 before umask)
	noSync   bool         // file:// with nosync: skip fsync (tests and throwaway dev data only)
	shared   bool         // mem://: bkt belongs to the process-global registry; never close it
	closed   atomic.Bool
}

// memBuckets is the process-global registry of mem:// buckets, keyed by the full URL string,
// so that several DB handles opened on "mem://x" in one process (typically one test) see the
// same objects, like several processes sharing one real bucket. Entries live for the whole
// process: closing a handle does not drop the data, so a close-and-reopen test still finds it.
var memBuckets = struct {
	sync.Mutex
	m map[string]*blob.Bucket
}{m: map[string]*blob.Bucket{}}

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
	switch u.Scheme {
	case "file":
		return openFileBucket(ctx, rawURL, u)
	case "mem":
		memBuckets.Lock()
		defer memBuckets.Unlock()
		bkt := memBuckets.m[rawURL]
		if bkt == nil {
			bkt, err = blob.OpenBucket(ctx, rawURL)
			if err != nil {
				return nil, invalidf("open %q: %v", rawURL, err)
			}
			memBuckets.m[rawURL] = bkt
		}
		return &Bucket{core: &bucketCore{url: rawURL, bkt: bkt, shared: true}}, nil
	case "s3", "gs", "azblob":
		bkt, err := blob.OpenBucket(ctx, rawURL)
		if err != nil {
			return nil, fmt.Errorf("open bucket %q: %w", rawURL, err)
		}
		return &Bucket{core: &bucketCore{url: rawURL, bkt: bkt}}, nil
	default:
		return nil, invalidf("storage url %q: unsupported scheme %q (want file, mem, s3, gs or azblob)", rawURL, u.Scheme)
	}
}

func openFileBucket(ctx context.Context, rawURL string, u *url.URL) (*Bucket, error) {
	if u.Host != "" && u.Host != "localhost" && u.Host != "." {
		return nil, invalidf("storage url %q: file:// host must be empty, localhost or \".\"", rawURL)
	}
	p := u.Path
	if u.Host == "." {
		p = strings.TrimPrefix(p, "/")
	}
	if p == "" {
		return nil, invalidf("storage url %q: empty path", rawURL)
	}
	root, err := filepath.Abs(filepath.FromSlash(p))
	if err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	dirMode := os.FileMode(0o777)
	q := u.Query()
	if s := q.Get("dir_file_mode"); s != "" {
		m, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return nil, invalidf("storage url %q: dir_file_mode: %v", rawURL, err)
		}
		dirMode = os.FileMode(m)
	}
	noSync := q.Get("nosync") != ""
	q.Del("nosync") // ours, not fileblob's: it rejects unknown parameters
	// Open through gocloud too: it validates the remaining query parameters exactly as a
	// fileblob user would expect and creates the root directory.
	q.Set("metadata", "skip")
	q.Set("create_dir", "1")
	gu := *u
	gu.RawQuery = q.Encode()
	bkt, err := blob.OpenBucket(ctx, gu.String())
	if err != nil {
		return nil, fmt.Errorf("open bucket %q: %w", rawURL, err)
	}
	return &Bucket{core: &bucketCore{url: rawURL, bkt: bkt, fileRoot: root, dirMode: dirMode, noSync: noSync}}, nil
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
	if b.core.shared {
		return nil
	}
	return b.core.bkt.Close()
}

// WithFaults returns a view of the same bucket whose every operation goes through f
// (nil f = no faults). The original handle is unaffected.
func (b *Bucket) WithFaults(f Faults) *Bucket {
	if b == nil {
		return nil
	}
	return &Bucket{core: b.core, faults: f}
}

// Get returns the object's bytes; ErrNotFound if absent.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	var data []byte
	err := b.do(ctx, OpGet, key, checkKey, func(c *bucketCore) error {
		var err error
		if c.fileRoot != "" {
			data, err = c.fileGet(key)
		} else {
			data, err = c.blobGet(ctx, key)
		}
		return err
	})
	if err != nil {
		return nil, wrapOp(OpGet, key, err)
	}
	return data, nil
}

// Put stores data under key, replacing any previous object. Readers see the old or the new
// bytes, never a mix: object stores replace atomically, and file:// writes a temp file in the
// target directory, fsyncs it, renames it over the key and fsyncs the directory.
func (b *Bucket) Put(ctx context.Context, key string, data []byte) error {
	err := b.do(ctx, OpPut, key, checkKey, func(c *bucketCore) error {
		if c.fileRoot != "" {
			return c.filePut(key, data, false)
		}
		return mapErr(c.bkt.WriteAll(ctx, key, data, writerOpts(false)))
	})
	return wrapOp(OpPut, key, err)
}

// PutFrom is Put for an object produced by write, streamed to storage instead of assembled
// in memory first: a merge's output run is as large as its input, and holding both at once
// is what the merge budget could not account for. The publication is as atomic as Put's
// (file://: temp file, fsync, rename; object stores: the upload only lands on a clean
// close), so an error from write, or a cancelled ctx, leaves the previous object or none.
// It is the same operation as Put for fault injection (OpPut). It returns the bytes written.
func (b *Bucket) PutFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	var n int64
	err := b.do(ctx, OpPut, key, checkKey, func(c *bucketCore) error {
		if c.fileRoot != "" {
			var err error
			n, err = c.filePutFrom(key, write)
			return err
		}
		// Cancelling the writer's context before Close is gocloud's documented way to
		// abandon an upload, so a failed write never publishes a prefix.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		w, err := c.bkt.NewWriter(wctx, key, writerOpts(false))
		if err != nil {
			return mapErr(err)
		}
		cw := &countingWriter{w: w}
		if err := write(cw); err != nil {
			cancel()
			_ = w.Close()
			return err
		}
		n = cw.n
		return mapErr(w.Close())
	})
	return n, wrapOp(OpPut, key, err)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// PutIfAbsent is the commit primitive: exactly one of many racing callers (goroutines or OS
// processes) succeeds; the others get ErrAlreadyExists and the winner's bytes stay intact.
//
//   - file://: write a temp file in the key's directory, fsync it, os.Link(tmp, final) —
//     link(2) fails with EEXIST atomically if the name exists, across processes — remove the
//     temp name and fsync the directory. Hard links must be supported by the filesystem.
//   - mem://: gocloud IfNotExist, checked and applied under the bucket's mutex.
//   - s3/gs/azblob: gocloud IfNotExist (S3 If-None-Match: *, GCS DoesNotExist precondition,
//     Azure If-None-Match: *). S3's 409 ConditionalRequestConflict (two conditional writes in
//     flight) is retried a few times: the retry then either wins or sees 412.
//
// Any error other than ErrAlreadyExists leaves the outcome unknown (the object may have
// landed); callers re-read the key to find out.
func (b *Bucket) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	err := b.do(ctx, OpPutIfAbsent, key, checkKey, func(c *bucketCore) error {
		if c.fileRoot != "" {
			return c.filePut(key, data, true)
		}
		var err error
		for attempt := 0; ; attempt++ {
			err = mapErr(c.bkt.WriteAll(ctx, key, data, writerOpts(true)))
			if err == nil || !isConditionalConflict(err) || attempt >= 4 {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(50<<attempt) * time.Millisecond):
			}
		}
	})
	return wrapOp(OpPutIfAbsent, key, err)
}

// Exists reports whether an object is stored under key.
func (b *Bucket) Exists(ctx context.Context, key string) (bool, error) {
	var ok bool
	err := b.do(ctx, OpExists, key, checkKey, func(c *bucketCore) error {
		var err error
		if c.fileRoot != "" {
			ok, err = c.fileExists(key)
		} else {
			ok, err = c.bkt.Exists(ctx, key)
		}
		return err
	})
	if err != nil {
		return false, wrapOp(OpExists, key, err)
	}
	return ok, nil
}

// Delete removes the object; an absent object is not an error, so clean-up can be retried.
// On file:// the directories left empty are removed too, so ListDirs answers the same as on
// an object store (which has no directories at all).
func (b *Bucket) Delete(ctx context.Context, key string) error {
	err := b.do(ctx, OpDelete, key, checkKey, func(c *bucketCore) error {
		if c.fileRoot != "" {
			return c.fileDelete(key)
		}
		err := mapErr(c.bkt.Delete(ctx, key))
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return err
	})
	return wrapOp(OpDelete, key, err)
}

// List returns every object whose key starts with prefix (a plain string prefix, recursive,
// "" = everything), sorted by key. Temp files never appear.
func (b *Bucket) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := b.do(ctx, OpList, prefix, checkPrefix, func(c *bucketCore) error {
		var err error
		if c.fileRoot != "" {
			out, err = c.fileList(ctx, prefix)
		} else {
			out, err = c.blobList(ctx, prefix)
		}
		return err
	})
	if err != nil {
		return nil, wrapOp(OpList, prefix, err)
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
	err := b.do(ctx, OpListDirs, prefix, checkPrefix, func(c *bucketCore) error {
		var err error
		if c.fileRoot != "" {
			out, err = c.fileListDirs(ctx, prefix)
		} else {
			out, err = c.blobListDirs(ctx, prefix)
		}
		return err
	})
	if err != nil {
		return nil, wrapOp(OpListDirs, prefix, err)
	}
	sort.Strings(out)
	return out, nil
}

// do runs one operation: handle and input checks, the Before fault, the operation, the
// After fault. Invalid input is reported before the fault hook so faults only see real calls.
func (b *Bucket) do(ctx context.Context, op, key string, check func(string) error, fn func(*bucketCore) error) error {
	if b == nil || b.core == nil || b.core.closed.Load() {
		return ErrClosed
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	if err := check(key); err != nil {
		return err
	}
	if b.faults != nil {
		if err := b.faults.Before(op, key); err != nil {
			return err
		}
	}
	err := ctx.Err()
	if err == nil {
		err = fn(b.core)
	}
	if b.faults != nil {
		err = b.faults.After(op, key, err)
	}
	return err
}

// wrapOp adds the operation and key to err, keeping the sentinel for errors.Is.
func wrapOp(op, key string, err error) error {
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	return fmt.Errorf("blob %s %q: %w", op, key, err)
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

// checkKey enforces the key rules documented on Bucket.
func checkKey(key string) error {
	if key == "" {
		return invalidf("empty key")
	}
	if len(key) > maxKeyBytes {
		return invalidf("key longer than %d bytes", maxKeyBytes)
	}
	return checkSegments(key, strings.Split(key, "/"))
}

// checkPrefix enforces the key rules on a List prefix: "" is allowed, and so is a trailing
// "/" and a partial last segment.
func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if len(prefix) > maxKeyBytes {
		return invalidf("prefix longer than %d bytes", maxKeyBytes)
	}
	segs := strings.Split(strings.TrimSuffix(prefix, "/"), "/")
	return checkSegments(prefix, segs)
}

func checkSegments(s string, segs []string) error {
	if !utf8.ValidString(s) {
		return invalidf("key %q is not valid UTF-8", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return invalidf("key %q contains a control character or backslash", s)
		}
	}
	for _, seg := range segs {
		switch {
		case seg == "":
			return invalidf("key %q has an empty segment (leading, trailing or double \"/\")", s)
		case seg == "." || seg == "..":
			return invalidf("key %q has a %q segment", s, seg)
		case len(seg) > maxSegmentBytes:
			return invalidf("key %q has a segment longer than %d bytes", s, maxSegmentBytes)
		case strings.HasPrefix(seg, tempPrefix):
			return invalidf("key %q has a segment starting with reserved %q", s, tempPrefix)
		}
	}
	return nil
}

// ---- gocloud backends (mem, s3, gs, azblob) ----

func (c *bucketCore) blobList(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	it := c.bkt.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, mapErr(err)
		}
		if obj.IsDir || isTempKey(obj.Key) {
			continue
		}
		out = append(out, ObjectInfo{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime})
	}
}

func (c *bucketCore) blobListDirs(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	it := c.bkt.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, mapErr(err)
		}
		if !obj.IsDir {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/")
		if name == "" || strings.HasPrefix(name, tempPrefix) {
			continue
		}
		out = append(out, name)
	}
}

// isTempKey reports whether any segment of key is a temp name. Object stores never hold temp
// objects written by us, but a foreign tool might copy a file:// tree there; hide them alike.
func isTempKey(key string) bool {
	return strings.HasPrefix(key, tempPrefix) || strings.Contains(key, "/"+tempPrefix)
}

// blobGet reads a gocloud object into one buffer sized from the object's length: ReadAll
// without a hint doubles its way up and allocates about twice the object (issue 4).
func (c *bucketCore) blobGet(ctx context.Context, key string) ([]byte, error) {
	r, err := c.bkt.NewReader(ctx, key, nil)
	if err != nil {
		return nil, mapErr(err)
	}
	defer r.Close()
	return readSized(r, r.Size())
}

// readSized reads r to EOF into a buffer of size bytes, the length the storage reported.
// A reader that turns out longer or shorter than reported still yields all of its bytes.
func readSized(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > 1<<40 {
		size = 0
	}
	// One spare byte lets the read observe EOF without growing a full buffer.
	buf := make([]byte, 0, size+1)
	for {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
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

// ---- file:// backend ----

func (c *bucketCore) path(key string) string {
	return filepath.Join(c.fileRoot, filepath.FromSlash(key))
}

func (c *bucketCore) fileGet(key string) ([]byte, error) {
	f, err := os.Open(c.path(key))
	if err != nil {
		if isNotExist(err) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, ErrNotFound
	}
	// Objects are never modified in place (only replaced by rename), so the open descriptor
	// reads one complete version even if a Put replaces the key meanwhile; its size is
	// known, so read it into one buffer of that size.
	return readSized(f, st.Size())
}

func (c *bucketCore) fileExists(key string) (bool, error) {
	st, err := os.Lstat(c.path(key))
	if err != nil {
		if isNotExist(err) {
			return false, nil
		}
		return false, err
	}
	return st.Mode().IsRegular(), nil
}

// filePut writes data to a temp file in the key's directory and publishes it by rename
// (replace) or by hard link (create-only). The temp file is removed in every case.
func (c *bucketCore) filePut(key string, data []byte, ifAbsent bool) error {
	final := c.path(key)
	dir := filepath.Dir(final)
	if ifAbsent {
		// Fast path for the loser of a race: skip the temp write and its fsync when the name
		// is already taken. Only an optimisation; link(2) below stays the arbiter.
		if _, err := os.Lstat(final); err == nil {
			return ErrAlreadyExists
		}
	}
	tmp, err := c.writeTemp(dir, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return c.publishTemp(tmp, final, ifAbsent)
}

// filePutFrom is filePut (replace) for a streamed object; it returns the bytes written.
func (c *bucketCore) filePutFrom(key string, write func(io.Writer) error) (int64, error) {
	final := c.path(key)
	var n int64
	tmp, err := c.writeTemp(filepath.Dir(final), func(f *os.File) error {
		// Large sequential writes: fewer syscalls than the encoder's page-sized writes.
		bw := bufio.NewWriterSize(f, 1<<20)
		cw := &countingWriter{w: bw}
		if err := write(cw); err != nil {
			return err
		}
		n = cw.n
		return bw.Flush()
	})
	if err != nil {
		return 0, err
	}
	return n, c.publishTemp(tmp, final, false)
}

// publishTemp publishes the complete temp file tmp as final: rename (replace) or hard
// link (create-only). tmp is removed in every case.
func (c *bucketCore) publishTemp(tmp, final string, ifAbsent bool) error {
	dir := filepath.Dir(final)
	defer os.Remove(tmp) // after a successful rename the name is gone and this is a no-op
	if ifAbsent {
		if err := os.Link(tmp, final); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return ErrAlreadyExists
			}
			return fmt.Errorf("publish with link(2) (the filesystem must support hard links): %w", err)
		}
	} else if err := os.Rename(tmp, final); err != nil {
		return err
	}
	// Make the new directory entry durable; the data itself was fsynced in writeTemp.
	if err := c.syncDir(dir); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

// writeTemp creates dir if needed and lets fill write a fresh temp file in it, which it then
// fsyncs. A concurrent Delete may prune dir between MkdirAll and the create; that is retried.
func (c *bucketCore) writeTemp(dir string, fill func(*os.File) error) (string, error) {
	var f *os.File
	for attempt := 0; ; attempt++ {
		if err := c.mkdirAll(dir); err != nil {
			if isNotExist(err) && attempt < 8 {
				continue
			}
			return "", err
		}
		var suffix [12]byte
		if _, err := rand.Read(suffix[:]); err != nil {
			return "", err
		}
		name := filepath.Join(dir, tempPrefix+hex.EncodeToString(suffix[:]))
		var err error
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			break
		}
		if (isNotExist(err) || errors.Is(err, fs.ErrExist)) && attempt < 8 {
			continue
		}
		return "", err
	}
	name := f.Name()
	err := fill(f)
	if err == nil && !c.noSync {
		err = f.Sync() // before publishing: a crash must never expose a name with partial bytes
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}

// mkdirAll creates dir and its missing parents, fsyncing the parent of each directory it
// creates so a published object's path survives a crash.
func (c *bucketCore) mkdirAll(dir string) error {
	st, err := os.Stat(dir)
	if err == nil {
		if st.IsDir() {
			return nil
		}
		return invalidf("%s is a file, cannot hold objects under it", dir)
	}
	if !isNotExist(err) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := c.mkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, c.dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return c.syncDir(parent)
}

func (c *bucketCore) fileDelete(key string) error {
	p := c.path(key)
	st, err := os.Lstat(p)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return err
	}
	if st.IsDir() {
		return nil // a directory is not an object
	}
	if err := os.Remove(p); err != nil && !isNotExist(err) {
		return err
	}
	// Prune directories this delete left empty (rmdir fails on a non-empty one, which ends
	// the walk). A concurrent writer that loses its directory retries in writeTemp.
	for dir := filepath.Dir(p); dir != c.fileRoot && strings.HasPrefix(dir, c.fileRoot); dir = filepath.Dir(dir) {
		if syscall.Rmdir(dir) != nil {
			break
		}
	}
	return nil
}

// fileList walks only the directory the prefix points into and filters by string prefix.
func (c *bucketCore) fileList(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	start := c.fileRoot
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = c.path(prefix[:i])
	}
	var out []ObjectInfo
	n := 0
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil // vanished under a concurrent delete, or the prefix dir is absent
			}
			return err
		}
		if n++; n%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if p == c.fileRoot {
			return nil
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(c.fileRoot, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			dk := key + "/"
			if !strings.HasPrefix(dk, prefix) && !strings.HasPrefix(prefix, dk) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (c *bucketCore) fileListDirs(ctx context.Context, prefix string) ([]string, error) {
	dir := c.fileRoot
	if prefix != "" {
		dir = c.path(strings.TrimSuffix(prefix, "/"))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if isNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		ok, err := hasObject(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// errFound stops hasObject's walk at the first object.
var errFound = errors.New("found")

// hasObject reports whether dir holds at least one object (a regular non-temp file) at any
// depth. Empty directories are pruned by Delete, so this normally stops at the first entry.
func hasObject(dir string) (bool, error) {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		if p != dir && strings.HasPrefix(d.Name(), tempPrefix) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}

func (c *bucketCore) syncDir(dir string) error {
	if c.noSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// isNotExist also treats ENOTDIR as absence: "a/b" is absent when "a" is a file.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
