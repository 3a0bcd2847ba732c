package s3test

import (
	"net/http"
	"testing"
)

// WithoutContentLength wraps next so that its GET responses carry no Content-Length and are
// sent chunked, as some S3-compatible servers and proxies answer: gocloud's s3blob then
// reports an object's size as 0, which a reader must survive without holding bytes it did
// not budget.
func WithoutContentLength(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(&noLengthWriter{ResponseWriter: w}, r)
	})
}

// noLengthWriter drops Content-Length and flushes the header at once, since net/http would
// otherwise compute a length for a body that fits its chunking buffer.
type noLengthWriter struct {
	http.ResponseWriter
	wroteHeader bool
}

func (w *noLengthWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader = true
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *noLengthWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(p)
}

// NoLengthBucketURL starts a server whose GET bodies carry no Content-Length
// (WithoutContentLength), with the one bucket, closed when t ends, and returns the bucket's
// URL with t's credentials set.
func NoLengthBucketURL(t testing.TB, bucket string) string {
	t.Helper()
	SetCredentials(t)
	return startServer(t, Options{Buckets: []string{bucket}, Wrap: WithoutContentLength}).BucketURL(bucket)
}
