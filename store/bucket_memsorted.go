package store

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// sortedMemBackend is mem://<name>?index=sorted: an in-memory bucket whose listings cost
// what an object store's do, O(log n + the keys listed), instead of gocloud's memblob, which
// sorts every key of the bucket on each list page (memblob.ListPaged). With a million stores
// registered, one memblob page takes a second and a listing of one store's shard directory
// as long as a listing of the whole fleet: the fleet benchmark (bench/fleet.go) needs the
// listing cost of a real object store to compare a full scan with the demand index. Same
// process-global sharing by URL as mem:// (memBuckets).
//
// Keys are kept in blocks of at most sortedBlockMax sorted keys (a two-level sorted list):
// an insert or delete moves at most one block's keys, a listing binary-searches its first
// block and walks forward.
type sortedMemBackend struct {
	mu     sync.RWMutex
	objs   map[string]sortedMemObject // REQUIRES: mu
	blocks [][]string                 // REQUIRES: mu; sorted, non-empty, in key order
}

type sortedMemObject struct {
	data    []byte
	modTime time.Time
}

const (
	sortedBlockMax = 512
	// sortedListPage is how many keys a listing copies under the read lock before calling
	// fn without it (fn may use the bucket).
	sortedListPage = 1000
)

var sortedMemBuckets = struct {
	sync.Mutex
	m map[string]*sortedMemBackend
}{m: map[string]*sortedMemBackend{}}

func openSortedMemBackend(rawURL string) *sortedMemBackend {
	sortedMemBuckets.Lock()
	defer sortedMemBuckets.Unlock()
	b := sortedMemBuckets.m[rawURL]
	if b == nil {
		b = &sortedMemBackend{objs: map[string]sortedMemObject{}}
		sortedMemBuckets.m[rawURL] = b
	}
	return b
}

// block returns the index of the block key belongs in (the last block whose first key is ≤
// key, or 0). REQUIRES: mu held.
func (m *sortedMemBackend) block(key string) int {
	i := sort.Search(len(m.blocks), func(i int) bool { return m.blocks[i][0] > key })
	return max(i-1, 0)
}

// insertKey adds a key that is not stored yet. REQUIRES: mu held for writing.
func (m *sortedMemBackend) insertKey(key string) {
	if len(m.blocks) == 0 {
		m.blocks = [][]string{{key}}
		return
	}
	bi := m.block(key)
	b := m.blocks[bi]
	at, _ := slices.BinarySearch(b, key)
	b = slices.Insert(b, at, key)
	if len(b) <= sortedBlockMax {
		m.blocks[bi] = b
		return
	}
	half := len(b) / 2
	left, right := slices.Clip(b[:half]), slices.Clone(b[half:])
	m.blocks[bi] = left
	m.blocks = slices.Insert(m.blocks, bi+1, right)
}

// removeKey drops a stored key. REQUIRES: mu held for writing.
func (m *sortedMemBackend) removeKey(key string) {
	bi := m.block(key)
	b := m.blocks[bi]
	at, found := slices.BinarySearch(b, key)
	if !found {
		return
	}
	b = slices.Delete(b, at, at+1)
	if len(b) == 0 {
		m.blocks = slices.Delete(m.blocks, bi, bi+1)
		return
	}
	m.blocks[bi] = b
}

func (m *sortedMemBackend) get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	o, ok := m.objs[key]
	m.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(o.data), nil
}

func (m *sortedMemBackend) put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := sortedMemObject{data: bytes.Clone(data), modTime: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; !ok {
		m.insertKey(key)
	}
	m.objs[key] = o
	return nil
}

func (m *sortedMemBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return 0, err
	}
	return int64(buf.Len()), m.put(ctx, key, buf.Bytes())
}

func (m *sortedMemBackend) putIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := sortedMemObject{data: bytes.Clone(data), modTime: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		return ErrAlreadyExists
	}
	m.insertKey(key)
	m.objs[key] = o
	return nil
}

func (m *sortedMemBackend) exists(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.RLock()
	_, ok := m.objs[key]
	m.mu.RUnlock()
	return ok, nil
}

func (m *sortedMemBackend) delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		delete(m.objs, key)
		m.removeKey(key)
	}
	return nil
}

// page copies up to sortedListPage objects with keys under prefix that sort after `after`
// ("" = from prefix), and whether the listing may go on.
func (m *sortedMemBackend) page(prefix, after string) ([]ObjectInfo, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	from := max(prefix, after)
	out := make([]ObjectInfo, 0, 64)
	for bi := m.block(from); bi < len(m.blocks); bi++ {
		b := m.blocks[bi]
		at, _ := slices.BinarySearch(b, from)
		for _, k := range b[at:] {
			if k <= after {
				continue
			}
			if !strings.HasPrefix(k, prefix) {
				return out, false
			}
			o := m.objs[k]
			out = append(out, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
			if len(out) == sortedListPage {
				return out, true
			}
		}
	}
	return out, false
}

func (m *sortedMemBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		objs, more := m.page(prefix, after)
		for _, o := range objs {
			if isTempKey(o.Key) {
				continue
			}
			if err := fn(o); err != nil {
				return err
			}
		}
		if !more || len(objs) == 0 {
			return nil
		}
		after = objs[len(objs)-1].Key
	}
}

// listDirs reports each immediate sub-directory once, skipping over its keys by seeking
// past the directory's prefix.
func (m *sortedMemBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	after := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		objs, more := m.page(prefix, after)
		dir := ""
		for _, o := range objs {
			rest := o.Key[len(prefix):]
			if i := strings.IndexByte(rest, '/'); i > 0 {
				dir = rest[:i]
				break
			}
		}
		switch {
		case dir != "":
			if !strings.HasPrefix(dir, tempPrefix) {
				if err := fn(dir); err != nil {
					return err
				}
			}
			// 0xff never occurs in UTF-8, so every key of the directory sorts before this.
			after = prefix + dir + "/\xff"
		case more:
			after = objs[len(objs)-1].Key
		default:
			return nil
		}
	}
}

func (m *sortedMemBackend) close() error { return nil }
