package store

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// memAccount is the Arrow allocator of one budgeted operation, charging every byte it hands
// out to the operation's Reservation, so the reservation bounds real allocations; freed
// buffers go back to the Budget's pool. Past the reservation a read buffer is refused, and an
// Arrow Allocate, which cannot be, is recorded as an overdraft (doc.go, "Budget").
type memAccount struct {
	res  *Reservation
	pool *bufferPool // nil: plain Go allocations, nothing reused

	// allocated is the bytes handed out and not yet freed (capacity, not length).
	allocated atomic.Int64
	// overdrawn is the bytes allocated while growth was refused (0 in a healthy merge).
	overdrawn atomic.Int64
	// outside is the bytes of res set aside for memory the account does not hand out.
	outside atomic.Int64
}

var _ memory.Allocator = (*memAccount)(nil)

// newMemAccount accounts allocations against res, reusing buffers of b's pool.
func newMemAccount(res *Reservation, b *Budget) *memAccount {
	a := &memAccount{res: res}
	if b != nil {
		a.pool = b.pool
	}
	return a
}

// bufAlignment is the start alignment of Arrow buffers (Arrow's own Go allocator uses 64).
const bufAlignment = 64

// Allocate returns a zeroed buffer of size bytes, as Arrow relies on, charged to the account.
func (a *memAccount) Allocate(size int) []byte {
	if size < 0 {
		panic("store: memAccount: negative size")
	}
	b, reused := a.get(size)
	a.charge(int64(cap(b)))
	if reused {
		clear(b[:cap(b)]) // fresh memory (make, mmap) is zeroed already
	}
	return b[:size]
}

// Reallocate grows or shrinks b to size, keeping its contents, like memory.GoAllocator.
func (a *memAccount) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free credits b and returns it to the pool. b must come from this account.
func (a *memAccount) Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	a.uncharge(int64(cap(b)))
	a.recycle(b)
}

// recycle returns b to the pool or gives it up (a mapped buffer to the OS at once).
func (a *memAccount) recycle(b []byte) {
	if a.pool == nil || a.pool.put(b[:0]) {
		return // without a pool the buffer is on the Go heap (get)
	}
	unmapBuffer(b)
}

// buffer returns a buffer of capacity at least n for an object's bytes, taking over the
// prepaid bytes, or false, without waiting or charging more, when it does not fit.
func (a *memAccount) buffer(n int, prepaid int64) (_ []byte, ok bool) {
	b, _ := a.get(n)
	switch extra := int64(cap(b)) - max(prepaid, 0); {
	case extra > 0 && !a.tryCharge(extra):
		a.recycle(b)
		return nil, false
	case extra < 0:
		a.uncharge(-extra)
	}
	return b[:0], true
}

// tryCharge charges n bytes if they fit the reservation, growing it without waiting.
func (a *memAccount) tryCharge(n int64) bool {
	for {
		cur := a.allocated.Load()
		if !a.fits(cur + n) {
			return false
		}
		if a.allocated.CompareAndSwap(cur, cur+n) {
			a.budgetAdd(n)
			return true
		}
	}
}

// fits reports whether total allocated bytes fit beside outside, growing res without waiting.
func (a *memAccount) fits(total int64) bool {
	total += a.outside.Load()
	return total <= a.res.Bytes() || a.res.TryGrow(total)
}

// uncharge credits n charged bytes: a freed buffer's, or what tryCharge took for memory the
// account does not hand out.
func (a *memAccount) uncharge(n int64) {
	a.allocated.Add(-n)
	a.budgetAdd(-n)
}

// budgetAdd keeps the budget-wide allocated gauge the pool is bounded by.
func (a *memAccount) budgetAdd(n int64) {
	if b := a.res.budget(); b != nil {
		b.allocated.Add(n)
	}
}

// charge adds the n bytes of an Arrow allocation; one that does not fit is an overdraft.
func (a *memAccount) charge(n int64) {
	total := a.allocated.Add(n)
	a.budgetAdd(n)
	if allocCheck {
		if b := a.res.budget(); b != nil && b.limit > 0 && b.Reserved() > b.limit {
			panic(fmt.Sprintf("store: %d bytes reserved from a budget of %d", b.Reserved(), b.limit))
		}
	}
	if a.fits(total) {
		return
	}
	a.overdrawn.Add(n)
	if allocCheck && !a.res.holdsWholeLimit() {
		panic(fmt.Sprintf("store: allocated %d bytes with a reservation of %d (budget %d): mergeFootprint is too small",
			total, a.res.Bytes(), a.res.budget().Limit()))
	}
}

// err is ErrBudgetBusy once an allocation overdrew the reservation.
func (a *memAccount) err() error {
	if n := a.overdrawn.Load(); n > 0 {
		return fmt.Errorf("%w: %d bytes allocated beyond the reservation of %d", ErrBudgetBusy, n, a.res.Bytes())
	}
	return nil
}

// Allocated returns the bytes handed out and not freed.
func (a *memAccount) Allocated() int64 { return a.allocated.Load() }

// get takes a buffer of capacity >= size from the pool, or allocates one aligned; without a
// pool buffers stay on the Go heap, since mapping each costs a syscall.
func (a *memAccount) get(size int) (_ []byte, reused bool) {
	if a.pool == nil {
		return heapBuffer(size), false
	}
	if b := a.pool.get(size); b != nil {
		return b, true
	}
	a.pool.trim(int64(classSize(classOf(size)))) // make room for the fresh buffer
	return alignedBuffer(size), false
}

// mapMinBytes is the smallest buffer mapped outside the Go heap; smaller ones stay on it.
const mapMinBytes = 256 << 10

// isMapped reports whether a buffer of capacity c, a class size, was (or would be) mapped.
func isMapped(c int) bool { return c >= mapMinBytes }

// alignedBuffer allocates the class size of size bytes, mapped from mapMinBytes on.
func alignedBuffer(size int) []byte {
	c := classSize(classOf(size))
	if isMapped(c) {
		if b := mapBuffer(c); b != nil {
			return b[:c:c]
		}
	}
	return heapBuffer(size)
}

// heapBuffer allocates the class size of size bytes on the Go heap, bufAlignment-aligned.
func heapBuffer(size int) []byte {
	c := classSize(classOf(size))
	raw := make([]byte, c+bufAlignment)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % bufAlignment) // to the next boundary
	return raw[off : off+c : off+c]
}

// Buffer size classes: four per power of two from 4 KiB, at most a quarter above a request.
const (
	minClassShift    = 12
	classSteps       = 4
	maxClassRounding = classSteps // request/maxClassRounding bounds the rounding
)

// readBufferBytes is the size class of a read buffer for an object of size bytes, plus one
// byte to tell an object longer than its manifest says.
func readBufferBytes(size int64) int64 {
	return int64(classSize(classOf(int(min(max(size, 0), maxReadBufferRequest)) + 1)))
}

// maxReadBufferRequest caps the size readBufferBytes classes, so a declared 2^63 cannot wrap.
const maxReadBufferRequest = 1 << 48

// classOf is the smallest class whose size is >= size.
func classOf(size int) int {
	if size <= 1<<minClassShift {
		return 0
	}
	shift := bits.Len(uint(size-1)) - 1 // 2^shift < size <= 2^(shift+1)
	step := (size - 1 - 1<<shift) >> (shift - 2)
	return (shift-minClassShift)*classSteps + step + 1
}

// classSize is the byte size of class c.
func classSize(c int) int {
	if c == 0 {
		return 1 << minClassShift
	}
	shift := (c-1)/classSteps + minClassShift
	step := (c-1)%classSteps + 1
	return 1<<shift + step<<(shift-2)
}

// bufferPool keeps freed buffers of a Budget by size class while pooled plus allocated bytes
// stay within the limit.
type bufferPool struct {
	budget *Budget
	mu     sync.Mutex
	free   map[int][][]byte // class -> buffers of at least classSize(class) bytes
	bytes  int64
}

// get returns a pooled buffer of capacity >= size (length 0), or nil.
func (p *bufferPool) get(size int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pop(classOf(size))
}

// pop takes the last pooled buffer of class c, or nil. REQUIRES: p.mu held.
func (p *bufferPool) pop(c int) []byte {
	l := p.free[c]
	if len(l) == 0 {
		return nil
	}
	b := l[len(l)-1]
	l[len(l)-1] = nil
	p.free[c] = l[:len(l)-1]
	p.bytes -= int64(cap(b))
	return b
}

// put keeps b for reuse if it fits the bound, and reports whether it did.
func (p *bufferPool) put(b []byte) bool {
	if cap(b) < classSize(0) {
		return false
	}
	c := classOf(cap(b)+1) - 1 // the largest class b can serve whole
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bytes+int64(cap(b))+p.budget.allocated.Load() > p.budget.Limit() {
		return false
	}
	p.free[c] = append(p.free[c], b)
	p.bytes += int64(cap(b))
	return true
}

// trim drops pooled buffers, largest first, until pooled plus allocated bytes plus extra fit.
func (p *bufferPool) trim(extra int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	over := p.bytes + p.budget.allocated.Load() + extra - p.budget.Limit()
	for over > 0 {
		big := -1
		for k, l := range p.free {
			if len(l) > 0 && k > big {
				big = k
			}
		}
		if big < 0 {
			return
		}
		b := p.pop(big)
		over -= int64(cap(b))
		unmapBuffer(b)
	}
}

// errBufferRefused: the account of a read could not hold the object's bytes without waiting.
var errBufferRefused = fmt.Errorf("%w: no room for the object's bytes", ErrBudgetBusy)

// readBuf is the buffers one Bucket read takes from an account, each charged until free (a
// read of an object longer than its storage reported asks again).
type readBuf struct {
	acct    *memAccount
	prepaid int64 // charged before the read; the first buffer takes it over
	bufs    [][]byte
	held    int64
}

// readBuffer returns the buffers of one read from a, the first taking over prepaid.
func (a *memAccount) readBuffer(prepaid int64) *readBuf {
	return &readBuf{acct: a, prepaid: prepaid}
}

// alloc is the read's objstore.Alloc.
func (r *readBuf) alloc(n int) ([]byte, error) {
	b, ok := r.acct.buffer(n, r.prepaid)
	if !ok {
		return nil, errBufferRefused
	}
	r.bufs, r.prepaid, r.held = append(r.bufs, b), 0, r.held+int64(cap(b))
	return b, nil
}

// free returns the buffers to the pool and credits whatever no buffer took. Idempotent.
func (r *readBuf) free() {
	for _, b := range r.bufs {
		r.acct.Free(b)
	}
	r.bufs, r.held = nil, 0
	if r.prepaid > 0 {
		r.acct.uncharge(r.prepaid)
		r.prepaid = 0
	}
}

// prepay charges, without waiting, a read buffer for size bytes, so that concurrent reads get
// their buffers in the caller's order.
func (a *memAccount) prepay(size int64) (int64, bool) {
	n := readBufferBytes(size)
	return n, a.tryCharge(n)
}
