package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// stallBound is the stall timeout of these tests; waitCap is how long a test waits for an
// operation that must end, far above it so a loaded machine never fails the test.
const (
	stallBound = 50 * time.Millisecond
	waitCap    = 30 * time.Second
)

var stallSeq atomic.Int64

func stallBucket(t *testing.T) *objstore.Bucket {
	t.Helper()
	return open(t, fmt.Sprintf("mem://stall-%d", stallSeq.Add(1))).WithStallTimeout(stallBound)
}

// within runs op and fails the test if it has not returned within waitCap.
func within(t *testing.T, op func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	select {
	case err := <-done:
		return err
	case <-time.After(waitCap):
		t.Fatalf("operation still running after %v (stall timeout %v)", waitCap, stallBound)
		return nil
	}
}

// A request the storage never answers fails with ErrStalled once the stall timeout passes,
// whatever the caller's context allows; the caller's own cancellation stays context.Canceled.
func TestStalledOperationFailsWithErrStalled(t *testing.T) {
	b := stallBucket(t)
	hung := b.WithFaults(objstore.HangFaults{Hang: func(op, key string) bool { return true }})
	ctx := context.Background()
	ops := bucketOps(hung)
	ops["dirs"] = func() error { _, err := hung.ListDirs(ctx, "p/"); return err }
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, within(t, op), objstore.ErrStalled)
		})
	}

	cctx, cancel := context.WithCancel(ctx)
	long := b.WithStallTimeout(time.Hour).WithFaults(objstore.HangFaults{Hang: func(op, key string) bool { return true }})
	time.AfterFunc(stallBound, cancel)
	err := within(t, func() error { return long.Put(cctx, "a/b", []byte("x")) })
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, objstore.ErrStalled)

	// The view without faults still answers: the stall was the request's, not the bucket's.
	require.NoError(t, b.Put(ctx, "a/b", []byte("x")))
}

// The clock runs only while the storage is waited on: a listing whose callback, or a
// streamed put whose writer, takes many stall timeouts of the caller's own time succeeds.
func TestStallTimeoutSparesSlowCallers(t *testing.T) {
	b := stallBucket(t).WithStallTimeout(100 * time.Millisecond)
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, b.Put(ctx, fmt.Sprintf("s/%d", i), []byte("x")))
	}
	seen := 0
	require.NoError(t, b.Walk(ctx, "s/", func(objstore.ObjectInfo) error {
		time.Sleep(200 * time.Millisecond)
		seen++
		return nil
	}))
	require.Equal(t, 3, seen)

	n, err := b.PutFrom(ctx, "s/big", func(w io.Writer) error {
		for range 3 {
			time.Sleep(200 * time.Millisecond)
			if _, err := w.Write(bytes.Repeat([]byte("y"), 1000)); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 3000, n)
}

// An S3 endpoint that accepts the connection and never replies: every request fails with
// ErrStalled within the stall timeout instead of hanging (the SDK sets no request timeout).
func TestS3EndpointThatNeverAnswersStalls(t *testing.T) {
	s3test.SetCredentials(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	b := open(t, s3test.BucketURL(srv.URL, "hang")).WithStallTimeout(200 * time.Millisecond)
	ctx := context.Background()
	err := within(t, func() error { return b.Put(ctx, "g/1", []byte("x")) })
	require.ErrorIs(t, err, objstore.ErrStalled)
	_, err = within2(t, func() ([]byte, error) { return b.Get(ctx, "g/1") })
	require.ErrorIs(t, err, objstore.ErrStalled)
	require.False(t, errors.Is(err, objstore.ErrNotFound))
}

// A read that keeps receiving bytes is not cut, however long it takes in total: an S3
// endpoint that sends an object in slices, the whole taking longer than the stall timeout.
func TestS3SlowButSteadyReadIsNotCut(t *testing.T) {
	s3test.SetCredentials(t)
	const slices, gap, stall = 24, 150 * time.Millisecond, 3 * time.Second
	body := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB per slice
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "only GET", http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(slices*len(body)))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", `"slow"`)
		w.Header().Set("Last-Modified", time.Unix(0, 0).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusOK)
		for range slices {
			time.Sleep(gap)
			_, _ = w.Write(body)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	raw := open(t, s3test.BucketURL(srv.URL, "slow"))
	require.Greater(t, time.Duration(slices)*gap, stall, "the read must take longer than the stall timeout")
	got, err := within2(t, func() ([]byte, error) { return raw.WithStallTimeout(stall).Get(context.Background(), "o/1") })
	require.NoError(t, err)
	require.Equal(t, bytes.Repeat(body, slices), got)
}

func within2[T any](t *testing.T, op func() (T, error)) (T, error) {
	t.Helper()
	var v T
	err := within(t, func() error {
		var err error
		v, err = op()
		return err
	})
	return v, err
}
