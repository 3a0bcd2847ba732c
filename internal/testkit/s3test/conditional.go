package s3test

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"sync"
)

// ExistsFunc reports whether an object is stored under bucket/key. It is called with the
// key's write lock held, so its answer stays true until the wrapped handler returns.
type ExistsFunc func(bucket, key string) (bool, error)

// ConditionalWrites wraps an S3 handler (path-style requests: /<bucket>/<key>) so that
// If-None-Match: * is atomic with respect to every other write of the same key:
//
//   - every request that writes or deletes one key — PutObject, CopyObject,
//     CompleteMultipartUpload, DeleteObject — holds that key's lock while the wrapped
//     handler runs;
//   - a PutObject or CompleteMultipartUpload carrying If-None-Match: * is answered with
//     412 PreconditionFailed, before the handler runs, when exists reports the key present;
//   - DeleteObjects (POST ?delete, many keys in the body) excludes all single-key writes for
//     its duration instead of parsing the body for the keys.
//
// Why it exists: gofakes3 evaluates If-None-Match for PutObject inside its backends' write
// transaction (atomic), but ignores it on CompleteMultipartUpload, which is what the AWS SDK's
// transfer manager (behind gocloud's s3blob) sends for objects of 16 MiB and more.
// With this wrapper both paths honour the precondition the way AWS S3 does. It adds one
// existence check per conditional write and serialises writes of one key, nothing else.
func ConditionalWrites(next http.Handler, exists ExistsFunc) http.Handler {
	return &conditional{next: next, exists: exists, keys: map[string]*keyLock{}}
}

type conditional struct {
	next   http.Handler
	exists ExistsFunc

	all  sync.RWMutex // read: one single-key write; write: a multi-key delete
	mu   sync.Mutex   // guards keys
	keys map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int
}

func (c *conditional) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Path-style, split the way gofakes3 routes it.
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case bucket != "" && key == "" && r.Method == http.MethodPost && r.URL.Query().Has("delete"):
		c.all.Lock()
		defer c.all.Unlock()
		c.next.ServeHTTP(w, r)
		return
	case bucket == "" || key == "" || !writesKey(r):
		c.next.ServeHTTP(w, r) // reads, listings, bucket operations, part uploads
		return
	}

	c.all.RLock()
	defer c.all.RUnlock()
	unlock := c.lock(bucket + "/" + key)
	defer unlock()

	if r.Header.Get("If-None-Match") == "*" && (r.Method == http.MethodPut || r.Method == http.MethodPost) {
		ok, err := c.exists(bucket, key)
		if err != nil {
			writeError(w, r, http.StatusInternalServerError, "InternalError", err.Error(), key)
			return
		}
		if ok {
			// Drain what the client sends so the connection stays usable, as S3 does.
			_, _ = io.Copy(io.Discard, r.Body)
			writeError(w, r, http.StatusPreconditionFailed, "PreconditionFailed",
				"At least one of the preconditions you specified did not hold", key)
			return
		}
	}
	c.next.ServeHTTP(w, r)
}

// writesKey reports whether r creates, replaces or deletes the object named in its path.
// UploadPart (PUT ?partNumber&uploadId) and AbortMultipartUpload (DELETE ?uploadId) only
// touch upload state; CreateMultipartUpload (POST ?uploads) writes nothing yet, and
// CompleteMultipartUpload (POST ?uploadId) writes it.
func writesKey(r *http.Request) bool {
	upload := r.URL.Query().Has("uploadId")
	return (r.Method == http.MethodPut || r.Method == http.MethodDelete) && !upload || r.Method == http.MethodPost && upload
}

// lock takes the per-key lock, creating it on first use and dropping it after the last user
// so the map only ever holds keys with a write in flight.
func (c *conditional) lock(k string) (unlock func()) {
	c.mu.Lock()
	l := c.keys[k]
	if l == nil {
		l = &keyLock{}
		c.keys[k] = l
	}
	l.refs++
	c.mu.Unlock()

	l.Lock()
	return func() {
		l.Unlock()
		c.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(c.keys, k)
		}
		c.mu.Unlock()
	}
}

// writeError writes an S3 XML error body, which the AWS SDK turns into an APIError with code.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg, key string) {
	type s3Error struct {
		XMLName   xml.Name `xml:"Error"`
		Code      string   `xml:"Code"`
		Message   string   `xml:"Message"`
		Resource  string   `xml:"Resource,omitempty"`
		RequestID string   `xml:"RequestId"`
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(s3Error{Code: code, Message: msg, Resource: key, RequestID: "s3test"})
}
