package objstore

import (
	"context"
	"fmt"
	"sync/atomic"
)

// maxEmptyListPages bounds the pages in a row that hold no entry yet promise more, in one
// listing: gocloud's ListIterator.Next recurses once per such driver page, which past the
// runtime's 1 GB stack limit kills the process, and the GCS client loops over its empty
// answers until the stall timeout (docs/STORAGE.md §4). S3, GCS and Azure send an empty page
// only now and then, so a thousand in a row is a server's fault.
const maxEmptyListPages = 1000

// emptyPages counts one listing's empty pages in a row: the driver pages requested since the
// listing last yielded an entry (gocloud's recursion, requested) and, on GCS, the empty
// answers the GCS client read within one driver page (emptyGCSAnswer). One listing runs on one
// goroutine; the counts are atomic only so that a transport may touch them from another.
type emptyPages struct {
	unyielded atomic.Bool  // a driver page was requested, and no entry yielded since
	n         atomic.Int64 // empty pages in a row
}

// emptyPagesKey keys the *emptyPages of one listing in the context of its requests.
type emptyPagesKey struct{}

// entry records an entry the listing yielded.
func (e *emptyPages) entry() {
	e.unyielded.Store(false)
	e.n.Store(0)
}

// empty records one more empty page, failing past maxEmptyListPages.
func (e *emptyPages) empty() error {
	if e.n.Add(1) > maxEmptyListPages {
		return fmt.Errorf("%w: more than %d empty pages in a row", errBadListing, maxEmptyListPages)
	}
	return nil
}

// requested records a driver page requested, failing after more than maxEmptyListPages
// driver pages in a row that yielded no entry. It sees every driver's pages, whatever the
// scheme: S3's and Azure's are one request each.
func (e *emptyPages) requested() error {
	if e.unyielded.Swap(true) {
		return e.empty()
	}
	return nil
}

// emptyGCSAnswer records a GCS objects.list answer of the listing whose request it answers
// (none: not counted) holding entries items and prefixes and whether it promises more: the
// GCS client fills a driver page from as many answers as it takes, asking again after an
// empty one without returning, so no BeforeList sees them.
func emptyGCSAnswer(ctx context.Context, entries int, more bool) error {
	e, _ := ctx.Value(emptyPagesKey{}).(*emptyPages)
	switch {
	case e == nil || !more:
		return nil
	case entries > 0:
		e.n.Store(0)
		return nil
	}
	return e.empty()
}
