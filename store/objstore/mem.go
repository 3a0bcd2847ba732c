package objstore

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
)

// memBackend is mem://, the dev and test backend: objects in memory under one mutex, in a
// B-tree by key so a listing costs O(log n + listed) and a write O(log n), not gocloud
// memblob's sort of every key per list.
type memBackend struct {
	mu   sync.Mutex
	objs *btree.BTreeG[memObject]
}

// memDegree is the B-tree's degree, as the store's memtables use.
const memDegree = 32

type memObject struct {
	key     string
	data    []byte
	modTime time.Time
}

func newMemBackend() *memBackend {
	return &memBackend{objs: btree.NewG(memDegree, func(a, b memObject) bool { return a.key < b.key })}
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
		m = newMemBackend()
		memBuckets.m[rawURL] = m
	}
	return m, nil
}

func (m *memBackend) close() error { return nil } // shared by every handle on the URL

func (m *memBackend) get(ctx context.Context, key string, limit int64, _ Alloc, _ *watchdog) ([]byte, error) {
	m.mu.Lock()
	o, ok := m.objs.Get(memObject{key: key})
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	// A copy, never alloc's memory: the object is in memory already, uncharged.
	return readSized(bytes.NewReader(o.data), int64(len(o.data)), limit, nil)
}

func (m *memBackend) put(ctx context.Context, key string, data []byte, ifAbsent bool, _ *watchdog) error {
	return m.store(key, bytes.Clone(data), ifAbsent)
}

func (m *memBackend) putFrom(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return 0, err // nothing published
	}
	if err := ctx.Err(); err != nil {
		return 0, err // abandoned like an upload whose context is cancelled
	}
	return int64(buf.Len()), m.store(key, buf.Bytes(), false)
}

// store publishes data under key under one lock hold, unless ifAbsent and it exists
// (ErrAlreadyExists).
func (m *memBackend) store(key string, data []byte, ifAbsent bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := memObject{key: key, data: data, modTime: time.Now()}
	if ifAbsent && m.objs.Has(o) {
		return ErrAlreadyExists
	}
	m.objs.ReplaceOrInsert(o)
	return nil
}

func (m *memBackend) exists(ctx context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.objs.Has(memObject{key: key}), nil
}

func (m *memBackend) delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs.Delete(memObject{key: key})
	return nil
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

// page returns up to memListPage objects under prefix, at or after from and after
// startAfter, in key order.
func (m *memBackend) page(prefix, from, startAfter string) []ObjectInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var page []ObjectInfo
	m.objs.AscendGreaterOrEqual(memObject{key: from}, func(o memObject) bool {
		if !strings.HasPrefix(o.key, prefix) {
			return false // from >= prefix, so every later key is past the prefix too
		}
		if o.key > startAfter {
			page = append(page, ObjectInfo{Key: o.key, Size: int64(len(o.data)), ModTime: o.modTime})
		}
		return len(page) < memListPage
	})
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
