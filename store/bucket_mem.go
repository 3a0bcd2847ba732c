package store

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// memBackend is mem://, the dev and test backend: objects in process memory, with a sorted
// key index so that a listing costs O(log n + listed), not O(n log n). gocloud's memblob,
// which mem:// used before, sorts every key of the bucket on every list call whatever the
// prefix: a ListPage of 500 took 0.27 s in a 100k-object bucket and 2.0 s in a 1M-object one
// (docs/BENCHMARKS.md "Listing"), so a fleet benchmark on mem:// measured memblob.
//
// One mutex guards everything: every operation is atomic, putIfAbsent included. The index
// is a sorted slice plus an unsorted tail of keys added since the last listing, merged in
// by the next listing; deleted keys leave the map at once and the index at a merge. Every
// operation is O(log n) but a listing after writes, which sorts the tail and merges: O(n).
type memBackend struct {
	mu      sync.Mutex
	objs    map[string]memObject
	sorted  []string // sorted, unique; may hold deleted keys until the next merge
	tail    []string // added since the last merge, unsorted
	removed int      // deleted keys still in sorted
}

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

func (m *memBackend) get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	o, ok := m.objs[key]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
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
	} else if !m.indexed(key) {
		m.tail = append(m.tail, key)
	} else {
		m.removed-- // a deleted key written again: its index entry is live once more
	}
	m.objs[key] = memObject{data: data, modTime: time.Now()}
	return true
}

// indexed reports whether key is in the sorted index (live or deleted). A deleted tail key
// written again is appended to the tail once more; merge drops the duplicate.
// REQUIRES: m.mu held; key not in m.objs.
func (m *memBackend) indexed(key string) bool {
	_, ok := slices.BinarySearch(m.sorted, key)
	return ok
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
	} // a tail key stays in the tail; merge drops it (and any duplicate a re-put adds)
	return nil
}

// merge folds the tail into the sorted index and drops deleted keys from it.
// REQUIRES: m.mu held.
func (m *memBackend) merge() {
	if len(m.tail) == 0 && m.removed*4 <= len(m.sorted) {
		return // deleted keys are skipped while listing; compact once they are a quarter
	}
	sort.Strings(m.tail)
	out := make([]string, 0, len(m.sorted)-m.removed+len(m.tail))
	i, j := 0, 0
	for i < len(m.sorted) || j < len(m.tail) {
		var k string
		if j == len(m.tail) || (i < len(m.sorted) && m.sorted[i] < m.tail[j]) {
			k, i = m.sorted[i], i+1
		} else {
			k, j = m.tail[j], j+1
		}
		if _, ok := m.objs[k]; ok && (len(out) == 0 || out[len(out)-1] != k) {
			out = append(out, k)
		}
	}
	m.sorted, m.tail, m.removed = out, nil, 0
}

// memListPage bounds the objects one lock hold collects, so a long listing does not hold
// the bucket's lock while fn runs and never copies more than a page.
const memListPage = 1000

// scan calls visit for the live keys >= from in key order, a page at a time, the lock held
// only while collecting a page; visit returns false to stop.
func (m *memBackend) scan(from string, collect func(key string, o memObject) (keep, stop bool), emit func(ObjectInfo) error) error {
	for {
		var page []ObjectInfo
		m.mu.Lock()
		m.merge()
		i, _ := slices.BinarySearch(m.sorted, from)
		stopped := false
		for ; i < len(m.sorted) && len(page) < memListPage; i++ {
			k := m.sorted[i]
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
		done := stopped || i >= len(m.sorted)
		if i < len(m.sorted) {
			from = m.sorted[i]
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
