package objstore

import (
	"context"
	"io"
)

// Operation names passed to Faults.Before and Faults.After. They are stable so reliability
// tests can target one kind of call (for example only put_if_absent on manifests).
const (
	OpGet         = "get"
	OpPut         = "put" // Put and PutFrom
	OpPutIfAbsent = "put_if_absent"
	OpExists      = "exists"
	OpDelete      = "delete"
	OpList        = "list"      // key = the prefix
	OpListDirs    = "list_dirs" // key = the normalised prefix
)

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

// faultBackend decorates any backend with a Faults hook: Before, then the wrapped
// operation (unless Before failed), then After with the operation's result. Bucket.WithFaults
// makes one; Bucket has already checked the handle and the key, so the hook sees only calls
// that reach storage.
type faultBackend struct {
	inner  backend
	faults Faults
}

func withFaults(inner backend, f Faults) *faultBackend {
	return &faultBackend{inner: inner, faults: f}
}

// around runs fn between the hook's Before and After for op on key.
func (f *faultBackend) around(op, key string, fn func() error) error {
	if err := f.faults.Before(op, key); err != nil {
		return err
	}
	return f.faults.After(op, key, fn())
}

func (f *faultBackend) get(ctx context.Context, key string, limit int64, alloc Alloc) (data []byte, err error) {
	err = f.around(OpGet, key, func() error {
		data, err = f.inner.get(ctx, key, limit, alloc)
		return err
	})
	return data, err
}

func (f *faultBackend) put(ctx context.Context, key string, data []byte) error {
	return f.around(OpPut, key, func() error { return f.inner.put(ctx, key, data) })
}

func (f *faultBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (n int64, err error) {
	err = f.around(OpPut, key, func() error {
		n, err = f.inner.putFrom(ctx, key, write)
		return err
	})
	return n, err
}

func (f *faultBackend) putIfAbsent(ctx context.Context, key string, data []byte) error {
	return f.around(OpPutIfAbsent, key, func() error { return f.inner.putIfAbsent(ctx, key, data) })
}

func (f *faultBackend) exists(ctx context.Context, key string) (ok bool, err error) {
	err = f.around(OpExists, key, func() error {
		ok, err = f.inner.exists(ctx, key)
		return err
	})
	return ok, err
}

func (f *faultBackend) delete(ctx context.Context, key string) error {
	return f.around(OpDelete, key, func() error { return f.inner.delete(ctx, key) })
}

func (f *faultBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return f.around(OpList, prefix, func() error { return f.inner.list(ctx, prefix, fn) })
}

func (f *faultBackend) listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	return f.around(OpList, prefix, func() error { return f.inner.listFrom(ctx, prefix, startAfter, fn) })
}

func (f *faultBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	return f.around(OpListDirs, prefix, func() error { return f.inner.listDirs(ctx, prefix, fn) })
}

// close is never called on a decorator (Bucket.Close closes the undecorated backend once);
// it forwards so a faultBackend is a complete backend.
func (f *faultBackend) close() error { return f.inner.close() }
