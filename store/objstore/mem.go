package objstore

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// memBackend is mem://, the dev and test backend: objects in memory under one mutex, with a
// sorted key index so a listing costs O(log n + listed), not gocloud memblob's sort of every
// key per list. The index is a sorted slice plus a small sorted tail of new keys, folded in
// once it holds memTailMax, so a write costs O(log n + memTailMax) amortized; deleted keys
// leave the index at a fold.
type memBackend struct {
	mu      sync.Mutex
	objs    map[string]memObject
	sorted  []string // sorted, unique; may hold deleted keys until the next fold
	tail    []string // sorted, unique, disjoint from sorted; added since the last fold
	removed int      // deleted keys still in sorted
}

// memTailMax is the tail's size at which it is folded into the sorted index.
const memTailMax = 4096

type memObject struct {
	data    []byte
	modTime time.Time
}

// memBuckets is the process-global registry of mem:// buckets by URL, so that handles opened
// on one URL see the same objects, like processes sharing a bucket, even after a close.
var memBuckets = struct {
	sync.Mutex
	m map[string]*memBackend
}{m: map[string]*memBackend{}}

func openMemBackend(rawURL string, u *url.URL, create bool) (*memBackend, error) {
	if u.RawQuery != "" {
		return nil, invalidf("storage url %q: mem:// takes no parameters", rawURL)
	}
	if !create {
		return &memBackend{}, nil
	}
	memBuckets.Lock()
	defer memBuckets.Unlock()
	m := memBuckets.m[rawURL]
	if m == nil {
		m = &memBackend{objs: map[string]memObject{}}
		memBuckets.m[rawURL] = m
	}
	return m, nil
}

func (m *memBackend) close() error { return nil } // shared by every handle on the URL

func (m *memBackend) get(ctx context.Context, key string, limit int64, _ Alloc, _ *watchdog) ([]byte, error) {
	m.mu.Lock()
	o, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	// A copy, never alloc's memory: the object is in memory already, uncharged.
	return readSized(bytes.NewReader(o.data), int64(len(o.data)), limit, nil)
}

func (m *memBackend) put(ctx context.Context, key string, data []byte, ifAbsent bool, _ *watchdog) error {
	if !m.store(key, bytes.Clone(data), ifAbsent) {
		return ErrAlreadyExists
	}
	return nil
}

func (m *memBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return 0, err // nothing published
	}
	if err := ctx.Err(); err != nil {
		return 0, err // abandoned like an upload whose context is cancelled
	}
	m.store(key, buf.Bytes(), false)
	return int64(buf.Len()), nil
}

// store publishes data under key (unless ifAbsent and it exists) under one lock hold, and
// reports whether it did.
func (m *memBackend) store(key string, data []byte, ifAbsent bool) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		if ifAbsent {
			return false
		}
	} else if _, inSorted := slices.BinarySearch(m.sorted, key); inSorted {
		m.removed-- // a deleted key written again: its index entry is live once more
	} else if j, inTail := slices.BinarySearch(m.tail, key); !inTail {
		m.tail = slices.Insert(m.tail, j, key)
	} // else a deleted tail key written again: its tail entry is live once more
	m.objs[key] = memObject{data: data, modTime: time.Now()}
	if len(m.tail) >= memTailMax {
		m.fold()
	}
	return true
}

func (m *memBackend) exists(ctx context.Context, key string) (bool, error) {
	m.mu.Lock()
	_, ok := m.objs[key]
	m.mu.Unlock()
	return ok, nil
}

func (m *memBackend) delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; !ok {
		return nil
	}
	delete(m.objs, key)
	if _, inSorted := slices.BinarySearch(m.sorted, key); inSorted {
		m.removed++
	} // a tail key stays in the tail; the next fold drops it
	if m.removed*4 > len(m.sorted) {
		m.fold() // deleted keys are skipped while listing; compact once they are a quarter
	}
	return nil
}

// fold merges the tail into the sorted index and drops deleted keys from both.
// REQUIRES: m.mu held.
func (m *memBackend) fold() {
	out := make([]string, 0, len(m.sorted)-m.removed+len(m.tail))
	live := func(k string) bool { _, ok := m.objs[k]; return ok }
	i, j := 0, 0
	for i < len(m.sorted) || j < len(m.tail) {
		if j == len(m.tail) || (i < len(m.sorted) && m.sorted[i] < m.tail[j]) {
			// With nothing deleted from the index every key of it is live: skip the map lookup.
			if m.removed == 0 || live(m.sorted[i]) {
				out = append(out, m.sorted[i])
			}
			i++
		} else {
			if live(m.tail[j]) {
				out = append(out, m.tail[j])
			}
			j++
		}
	}
	m.sorted, m.tail, m.removed = out, nil, 0
}

// memListPage bounds the objects one lock hold collects, so a long listing does not hold
// the bucket's lock while fn runs and never copies more than a page.
const memListPage = 1000

func (m *memBackend) listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	from := max(prefix, startAfter)
	for {
		page := m.page(prefix, from, startAfter)
		for _, o := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(o); err != nil {
				return err
			}
		}
		if len(page) < memListPage {
			return nil
		}
		from = page[len(page)-1].Key + "\x00" // the smallest key after the page's last
	}
}

// page returns up to memListPage live objects under prefix, at or after from and after
// startAfter, in key order: it walks the sorted index and the tail in step.
func (m *memBackend) page(prefix, from, startAfter string) []ObjectInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearch(m.sorted, from)
	j, _ := slices.BinarySearch(m.tail, from)
	var page []ObjectInfo
	for len(page) < memListPage && (i < len(m.sorted) || j < len(m.tail)) {
		var k string
		if j == len(m.tail) || (i < len(m.sorted) && m.sorted[i] < m.tail[j]) {
			k, i = m.sorted[i], i+1
		} else {
			k, j = m.tail[j], j+1
		}
		if !strings.HasPrefix(k, prefix) {
			break // from >= prefix, so every later key is past the prefix too
		}
		if o, ok := m.objs[k]; ok && k > startAfter {
			page = append(page, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
		}
	}
	return page
}

func (m *memBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return m.listFrom(ctx, prefix, "", fn)
}

func (m *memBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	last := ""
	return m.listFrom(ctx, prefix, "", func(o ObjectInfo) error {
		rest := o.Key[len(prefix):]
		i := strings.IndexByte(rest, '/')
		if i <= 0 || rest[:i] == last {
			return nil
		}
		last = rest[:i]
		return fn(last)
	})
}
