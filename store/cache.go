package store

import (
	"container/list"
	"context"
	"errors"
	"math"
	"sort"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/singleflight"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// sortedFile is a decoded generation or base run: rows sorted by key, one row per key.
type sortedFile struct {
	path  string
	rec   arrow.RecordBatch
	view  rowcodec.RecordView
	n     int
	bytes int64
}

// newSortedFile wraps rec, checking that its keys ascend strictly from above last; it neither
// retains nor releases rec.
func newSortedFile(c *rowcodec.Codec, what string, rec arrow.RecordBatch, last string, seen bool) (*sortedFile, error) {
	view, err := c.View(rec)
	if err != nil {
		return nil, err
	}
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		if i > 0 && view.Key(i-1) >= view.Key(i) || i == 0 && seen && last >= view.Key(0) {
			return nil, corruptf("%s: keys not strictly sorted at row %d", what, i)
		}
	}
	return &sortedFile{path: what, rec: rec, view: view, n: n, bytes: recordBytes(rec)}, nil
}

// find returns the row index of key, or -1.
func (f *sortedFile) find(key string) int {
	i := sort.Search(f.n, func(i int) bool { return f.view.Key(i) >= key })
	if i < f.n && f.view.Key(i) == key {
		return i
	}
	return -1
}

// firstAfter returns the first row index whose key is > after ("" = 0).
func (f *sortedFile) firstAfter(after string) int {
	if after == "" {
		return 0
	}
	return sort.Search(f.n, func(i int) bool { return f.view.Key(i) > after })
}

// fileCache keeps decoded immutable files for reads, bounded by bytes, least recently used
// first out; a referenced object never changes, so entries never go stale.
type fileCache struct {
	limit int64
	group singleflight.Group

	mu    sync.Mutex
	used  int64
	order *list.List // front = most recent; values are *sortedFile
	byKey map[string]*list.Element
	// large are base runs whose footer says they decode to more than it keeps.
	large keySet
}

// maxLargeRuns bounds large; a run forgotten costs its next read one extra fetch of the whole
// object, whose footer then says it again.
const maxLargeRuns = 4096

func newFileCache(limit int64) *fileCache {
	return &fileCache{limit: limit, order: list.New(), byKey: map[string]*list.Element{}, large: keySet{limit: maxLargeRuns}}
}

// get returns the cached file or loads it once for concurrent callers; the file stays valid
// after eviction until no reader holds it.
func (c *fileCache) get(ctx context.Context, path string, load func(context.Context) (*sortedFile, error)) (*sortedFile, error) {
	c.mu.Lock()
	if el, ok := c.byKey[path]; ok {
		c.order.MoveToFront(el)
		f := el.Value.(*sortedFile)
		c.mu.Unlock()
		return f, nil
	}
	c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		v, err, shared := c.group.Do(path, func() (any, error) {
			f, err := load(ctx)
			if err != nil {
				return nil, err
			}
			c.put(f)
			return f, nil
		})
		// A load shared from a caller whose context ended is tried again by a live one.
		if err != nil && shared && ctx.Err() == nil && attempt < readAttempts &&
			(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return v.(*sortedFile), nil
	}
}

func (c *fileCache) put(f *sortedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[f.path]; ok {
		return
	}
	if !c.keeps(f.bytes) {
		return // too big to be worth evicting everyone else for
	}
	c.byKey[f.path] = c.order.PushFront(f)
	c.used += cachedBytes(f.bytes)
	for c.used > c.limit && c.order.Len() > 0 {
		c.removeLocked(c.order.Back())
	}
}

// removeLocked drops a cached file. REQUIRES: c.mu held.
func (c *fileCache) removeLocked(el *list.Element) {
	f := c.order.Remove(el).(*sortedFile)
	delete(c.byKey, f.path)
	c.used -= cachedBytes(f.bytes)
}

// cachedFileOverhead is what a cached file holds beyond its record's buffers
// (docs/RELIABILITY.md finding 55).
const cachedFileOverhead = decodedFileHeap + ipcObjectOverhead

// ipcObjectOverhead estimates a cached IPC generation's schemas, metadata and padding.
const ipcObjectOverhead = 2 << 10

// cachedBytes is what the cache counts for a file whose record holds n bytes, capped.
func cachedBytes(n int64) int64 {
	return min(max(n, 0), math.MaxInt64-cachedFileOverhead) + cachedFileOverhead
}

// peek returns the cached file at path, or nil, leaving its recency alone.
func (c *fileCache) peek(path string) *sortedFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[path]; ok {
		return el.Value.(*sortedFile)
	}
	return nil
}

// keeps reports whether put would keep a file of about n bytes.
func (c *fileCache) keeps(n int64) bool { return cachedBytes(n) <= c.limit/4 }

// forget drops path (after its object was deleted).
func (c *fileCache) forget(path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[path]; ok {
		c.removeLocked(el)
	}
}

func (c *fileCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.byKey = map[string]*list.Element{}
	c.used = 0
	c.large.clear()
}
