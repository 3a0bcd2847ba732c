package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// memBackend is mem://, the dev and test backend: objects in process memory, with a sorted
// key index so that a listing costs O(log n + listed), not O(n log n). gocloud's memblob,
// which mem:// used before, sorts every key of the bucket on every list call whatever the
// prefix: a ListPage of 500 took 0.27 s in a 100k-object bucket and 2.0 s in a 1M-object one
// (docs/benchmarks/listing.md), so a fleet benchmark on mem:// measured memblob.
//
// One mutex guards everything: every operation is atomic, putIfAbsent included. The index
// is a sorted slice plus a small sorted tail of keys added since the last fold; a listing
// walks both in step, so a write costs O(log n + memTailMax) and a listing O(log n + listed)
// whatever was written before it. The tail is folded into the sorted slice (O(n)) once it
// holds memTailMax keys, amortized O(n / memTailMax) per write. Folding on every listing
// after a write instead made a seal in a 1M-object bucket cost ~0.5 s (docs/benchmarks/fleet.md).
// Deleted keys leave the map at once and the index at a fold.
type memBackend struct {
	mu      sync.Mutex
	objs    map[string]memObject
	sorted  []string // sorted, unique; may hold deleted keys until the next fold
	tail    []string // sorted, unique, disjoint from sorted; added since the last fold
	removed int      // deleted keys still in sorted
}

// memTailMax is the tail's size at which it is folded into the sorted index: inserting into
// the tail moves at most this many keys, and a fold (O(n)) happens once per this many new
// keys.
const memTailMax = 4096

type memObject struct {
	data    []byte
	modTime time.Time
}

// memBuckets is the process-global registry of mem:// buckets, keyed by the full URL string,
// so that several DB handles opened on "mem://x" in one process (typically one test) see the
// same objects, like several processes sharing one real bucket. Entries live for the whole
// process: closing a handle does not drop the data, so a close-and-reopen test still finds it.
var memBuckets = struct {
	sync.Mutex
	m map[string]*memBackend
}{m: map[string]*memBackend{}}

func openMemBackend(_ context.Context, rawURL string) (*memBackend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalidf("storage url %q: %v", rawURL, err)
	}
	if u.RawQuery != "" {
		return nil, invalidf("storage url %q: mem:// takes no parameters", rawURL)
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

func (m *memBackend) get(ctx context.Context, key string, limit int64, _ Alloc) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	o, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	if limit >= 0 && int64(len(o.data)) > limit {
		return nil, fmt.Errorf("%w: %d bytes stored, at most %d expected", ErrTooLarge, len(o.data), limit)
	}
	return bytes.Clone(o.data), nil // objects are immutable; callers may modify their copy
}

func (m *memBackend) put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.store(key, bytes.Clone(data), false)
	return nil
}

func (m *memBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
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

func (m *memBackend) putIfAbsent(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !m.store(key, bytes.Clone(data), true) {
		return ErrAlreadyExists
	}
	return nil
}

// store publishes data under key (unless ifAbsent and the key exists) and reports whether
// it did. The check and the write happen under one lock hold.
func (m *memBackend) store(key string, data []byte, ifAbsent bool) bool {
	if data == nil {
		data = []byte{}
	}
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
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	_, ok := m.objs[key]
	m.mu.Unlock()
	return ok, nil
}

func (m *memBackend) delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
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
			// With nothing deleted from the index every key of it is live: copy without a
			// map lookup per key (2M lookups per fold made a 1M-store registration 10x slower).
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

// scan calls visit for the live keys >= from in key order, walking the sorted index and
// the tail in step, a page at a time, the lock held only while collecting a page; visit
// returns false to stop.
func (m *memBackend) scan(from string, collect func(key string, o memObject) (keep, stop bool), emit func(ObjectInfo) error) error {
	for {
		var page []ObjectInfo
		m.mu.Lock()
		i, _ := slices.BinarySearch(m.sorted, from)
		j, _ := slices.BinarySearch(m.tail, from)
		stopped := false
		for len(page) < memListPage && (i < len(m.sorted) || j < len(m.tail)) {
			var k string
			if j == len(m.tail) || (i < len(m.sorted) && m.sorted[i] < m.tail[j]) {
				k, i = m.sorted[i], i+1
			} else {
				k, j = m.tail[j], j+1
			}
			o, ok := m.objs[k]
			if !ok {
				continue
			}
			keep, stop := collect(k, o)
			if stop {
				stopped = true
				break
			}
			if keep {
				page = append(page, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
			}
		}
		done := stopped || (i >= len(m.sorted) && j >= len(m.tail))
		if !done {
			// The next unvisited key: the smaller head of the two (keys >= it were not seen).
			switch {
			case i == len(m.sorted):
				from = m.tail[j]
			case j == len(m.tail) || m.sorted[i] < m.tail[j]:
				from = m.sorted[i]
			default:
				from = m.tail[j]
			}
		}
		m.mu.Unlock()
		for _, o := range page {
			if err := emit(o); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

func (m *memBackend) listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	from := max(prefix, startAfter)
	return m.scan(from, func(k string, _ memObject) (bool, bool) {
		if !strings.HasPrefix(k, prefix) {
			return false, k > prefix // past the prefix: stop
		}
		return k > startAfter, false
	}, func(o ObjectInfo) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return fn(o)
	})
}

func (m *memBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return m.listFrom(ctx, prefix, "", fn)
}

func (m *memBackend) listDirs(ctx context.Context, prefix string, fn func(string) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
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
