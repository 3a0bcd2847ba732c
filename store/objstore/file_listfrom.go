package objstore

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
)

// fileListWindow bounds the directory entries one ordered listing holds per directory level;
// a larger directory is read again for the next window.
const fileListWindow = 1024

// listFrom lists in key order from startAfter, ordering a directory's entries by the key they
// stand for (a sub-directory "d" as "d/"), since os.ReadDir's name order is not key order.
// Sub-directories wholly before startAfter or outside prefix are never opened, and only
// listed files are stat'ed.
func (f *fileBackend) listFrom(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	return f.walkOrdered(ctx, prefix, startAfter, fn, fileListWindow)
}

// list is the ordered walk from the first key with no window: a walk of the whole prefix
// reads each directory once, holding one directory's names per level.
func (f *fileBackend) list(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return f.walkOrdered(ctx, prefix, "", fn, math.MaxInt/2)
}

// walkOrdered walks from the directory prefix points into, whose key prefix is "" or ends in
// "/".
func (f *fileBackend) walkOrdered(ctx context.Context, prefix, after string, fn func(ObjectInfo) error,
	held int) error {
	w := &fileOrderedWalk{f: f, ctx: ctx, prefix: prefix, after: after, fn: fn, held: held}
	return w.dir(prefix[:strings.LastIndex(prefix, "/")+1])
}

type fileOrderedWalk struct {
	f      *fileBackend
	ctx    context.Context
	prefix string
	after  string
	fn     func(ObjectInfo) error
	held   int // the entries a window holds per directory level (fileListWindow)
}

// dirEntryKey is one entry of a directory as the key it stands for ("d/" for a directory).
type dirEntryKey struct {
	key   string
	isDir bool
}

// wanted reports whether the entry can hold or be a key to list: inside prefix and not
// wholly at or before `after`.
func (w *fileOrderedWalk) wanted(e dirEntryKey) bool {
	if e.isDir {
		inPrefix := strings.HasPrefix(e.key, w.prefix) || strings.HasPrefix(w.prefix, e.key)
		return inPrefix && (e.key > w.after || strings.HasPrefix(w.after, e.key))
	}
	return strings.HasPrefix(e.key, w.prefix) && e.key > w.after
}

// dir lists the directory standing for dirKey, window by window.
func (w *fileOrderedWalk) dir(dirKey string) error {
	lower := "" // entries at or before lower were listed by an earlier window
	for {
		win, full, err := w.window(dirKey, lower)
		if err != nil {
			return err
		}
		for _, e := range win {
			if err := w.ctx.Err(); err != nil {
				return err
			}
			if e.isDir {
				if err := w.dir(e.key); err != nil {
					return err
				}
				continue
			}
			if err := w.file(e.key); err != nil {
				return err
			}
		}
		if !full {
			return nil
		}
		lower = win[len(win)-1].key
	}
}

// window reads the directory and returns, sorted, the w.held smallest wanted entries
// after lower, and whether the window was full (more may follow).
func (w *fileOrderedWalk) window(dirKey, lower string) ([]dirEntryKey, bool, error) {
	d, err := w.f.openDir(relPath(strings.TrimSuffix(dirKey, "/")))
	if d == nil || err != nil {
		return nil, false, err // nil, nil: absent, or pruned under a concurrent delete
	}
	defer d.Close()
	var win []dirEntryKey // the wanted entries, cut back to the smallest w.window
	full := false
	cut := func() {
		slices.SortFunc(win, func(a, b dirEntryKey) int { return strings.Compare(a.key, b.key) })
		if len(win) > w.held {
			win, full = win[:w.held], true
		}
	}
	for {
		ents, err := d.ReadDir(256)
		for _, de := range ents {
			name := de.Name()
			if strings.HasPrefix(name, tempPrefix) {
				continue
			}
			e := dirEntryKey{key: dirKey + name, isDir: de.IsDir()}
			if e.isDir {
				e.key += "/"
			} else if !de.Type().IsRegular() {
				continue
			}
			if (lower != "" && e.key <= lower) || !w.wanted(e) {
				continue
			}
			if win = append(win, e); len(win) == 2*w.held {
				cut()
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			break
		}
		if err != nil {
			if isNotExist(err) {
				break
			}
			return nil, false, err
		}
		if err := w.ctx.Err(); err != nil {
			return nil, false, err
		}
	}
	cut()
	return win, full, nil
}

// file stats one listed key and hands it to fn; a file removed meanwhile is skipped.
func (w *fileOrderedWalk) file(key string) error {
	st, err := w.f.lstat(relPath(key))
	if st == nil || !st.Mode().IsRegular() {
		return err // nil, unless the stat failed
	}
	return w.fn(ObjectInfo{Key: key, Size: st.Size(), ModTime: st.ModTime()})
}
