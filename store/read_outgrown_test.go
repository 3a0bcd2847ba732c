package store

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// readOutgrowing reads object the way a Bucket reads one its storage reported reported bytes
// long (objstore.Alloc): into a buffer of reported+1 bytes, then into buffers twice as large,
// at most limit+1, each taking a copy of the one before.
func readOutgrowing(alloc objstore.Alloc, object []byte, reported, limit int) ([]byte, error) {
	buf, err := alloc(reported + 1)
	if err != nil {
		return nil, err
	}
	for {
		buf = buf[:len(buf)+copy(buf[len(buf):cap(buf)], object[len(buf):])]
		if len(buf) == len(object) && len(buf) < cap(buf) {
			return buf, nil
		}
		grown, err := alloc(min(2*cap(buf), limit+1))
		if err != nil {
			return nil, err
		}
		buf = append(grown, buf...)
	}
}

// A read whose object outgrows the size its storage reported asks its allocator again: a
// merge's or compaction's read buffer charges each buffer to the account or fails the read
// ErrBudgetBusy, and an arena counts the object once in what it has left to pack. The second
// buffer used to come from the Go heap, uncharged.
func TestFindingReadOutgrowingItsReportedSizeIsCharged(t *testing.T) {
	object := bytes.Repeat([]byte("x"), 300<<10)
	rb := NewBudget(64 << 20)

	res := mustReserve(t, rb, 1<<20)
	a := newMemAccount(res, rb)
	buf := a.readBuffer(0)
	got := call(readOutgrowing(buf.alloc, object, 10, len(object))).must(t)
	require.Equal(t, object, got)
	require.Greater(t, a.Allocated(), int64(cap(got)), "the buffers the read outgrew are held, charged, until free")
	require.Equal(t, a.Allocated(), buf.held, "the read says what it holds")
	require.Equal(t, a.Allocated(), rb.Allocated(), "every buffer is charged to the budget")
	buf.free()
	require.Zero(t, a.Allocated())
	res.Release()

	// With the rest of the budget held, the reservation cannot grow: the read fails busy.
	const admitted = 64 << 10
	res = mustReserve(t, rb, admitted)
	blocker := mustReserve(t, rb, rb.Limit()-admitted)
	a = newMemAccount(res, rb)
	buf = a.readBuffer(0)
	require.ErrorIs(t, errOf(readOutgrowing(buf.alloc, object, 10, len(object))), ErrBudgetBusy)
	require.LessOrEqual(t, a.Allocated(), int64(admitted))
	require.Equal(t, a.Allocated(), rb.Allocated())
	buf.free()
	require.Zero(t, a.Allocated())
	res.Release()
	blocker.Release()

	// An arena: the grown object's buffers are charged, its share of toPack taken once.
	requests := []int64{100<<10 + 1, 100<<10 + 1, 100<<10 + 1}
	res = mustReserve(t, rb, arenaEstimate(requests)+int64(len(requests))*decodedFileHeap)
	a = newMemAccount(res, rb)
	r := newReadArena(a, requests)
	got = call(readOutgrowing(r.alloc(requests[0]), object[:100<<10], 0, 100<<10)).must(t)
	require.Equal(t, object[:100<<10], got)
	require.Equal(t, requests[1]+requests[2], r.toPack, "the grown object is counted once")
	for _, n := range requests[1:] {
		buf := call(r.alloc(n)(int(n))).must(t)
		require.Equal(t, int(n), cap(buf))
	}
	require.Equal(t, a.Allocated(), rb.Allocated(), "every buffer is charged to the budget")
	r.free()
	require.Zero(t, a.Allocated())
	res.Release()
	require.Zero(t, rb.Reserved())
}
