// Package s3test runs an S3-compatible object store in-process, so walkeeper's s3:// backend
// is tested against a real HTTP S3 API (AWS SDK v2 through gocloud's s3blob, SigV4 signing,
// XML listings, multipart uploads) without Docker or network access.
//
// The server is github.com/johannesboyne/gofakes3 (MIT) with its in-memory backend (or any
// other gofakes3 backend), wrapped in ConditionalWrites so that If-None-Match: * is atomic on
// PutObject and on CompleteMultipartUpload alike; see docs/STORAGE.md. It is a fast
// in-process fake for unit tests, not a supported server: the backend matrix
// (test/backends) runs real ones.
//
// Typical use:
//
//	url := s3test.Start(t) // s3://<bucket>?endpoint=http://127.0.0.1:PORT&region=us-east-1&...
//	db, err := store.OpenDB(ctx, url, opts)
//
// Start sets AWS_ACCESS_KEY_ID and friends with t.Setenv, so the test (and its subtests) must
// not call t.Parallel, and child processes started with os.Environ() inherit them.
package s3test

import (
	"crypto/rand"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	bolt "go.etcd.io/bbolt"
)

// Test credentials. The server does not verify signatures; the client still signs every
// request, so the SigV4 code path is the one production uses.
const (
	AccessKeyID     = "walkeeper-test"
	SecretAccessKey = "walkeeper-test-secret"
	Region          = "us-east-1"
)

// Options configure a Server. The zero value is a fresh in-memory server on a random
// loopback port.
type Options struct {
	// BoltPath, when set, keeps the objects in a bbolt database file instead of in memory
	// (gofakes3's s3bolt backend: every write is one bolt transaction, so it survives
	// restarts and readers see whole objects), without an fsync per write.
	BoltPath string
	// Buckets are created at start when missing.
	Buckets []string
	// Wrap, when set, wraps the S3 handler (e.g. in a Gate).
	Wrap func(http.Handler) http.Handler
}

// Server is a running S3-compatible server.
type Server struct {
	backend  gofakes3.Backend
	closeDB  func() error // nil unless New opened the backend's database
	listener net.Listener
	http     *http.Server
}

// NewHandler returns the S3 HTTP handler over backend: gofakes3 (path-style addressing,
// versioning off, 15 min clock-skew limit) wrapped in ConditionalWrites.
func NewHandler(backend gofakes3.Backend) http.Handler {
	fake := gofakes3.New(backend, gofakes3.WithoutVersioning())
	return ConditionalWrites(fake.Server(), func(bucket, key string) (bool, error) {
		obj, err := backend.HeadObject(bucket, key)
		if err != nil {
			if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
				return false, nil
			}
			return false, err
		}
		if obj.Contents != nil {
			_ = obj.Contents.Close()
		}
		return true, nil
	})
}

// New starts a server. Close it when done.
func New(opts Options) (_ *Server, err error) {
	s := &Server{backend: s3mem.New()}
	if opts.BoltPath != "" {
		db, err := bolt.Open(opts.BoltPath, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: true})
		if err != nil {
			return nil, fmt.Errorf("open bolt database %s: %w", opts.BoltPath, err)
		}
		s.backend, s.closeDB = s3bolt.New(db), db.Close
		defer func() {
			if err != nil {
				_ = db.Close()
			}
		}()
	}
	for _, b := range opts.Buckets {
		if err := ensureBucket(s.backend, b); err != nil {
			return nil, err
		}
	}
	if s.listener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	handler := NewHandler(s.backend)
	if opts.BoltPath != "" {
		handler = exclusiveReads(handler)
	}
	if opts.Wrap != nil {
		handler = opts.Wrap(handler)
	}
	s.http = &http.Server{Handler: handler, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = s.http.Serve(s.listener) }()
	return s, nil
}

// exclusiveReads works around gofakes3's s3bolt backend (v1.2.0), whose GetObject and
// HeadObject hand out bytes aliasing a bbolt page after the read transaction has ended, so
// that a write reusing the page changed a body still being sent (the client saw a checksum
// mismatch): a read is answered into a buffer while no write runs, and sent from there.
func exclusiveReads(next http.Handler) http.Handler {
	var mu sync.RWMutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			mu.Lock()
			defer mu.Unlock()
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		mu.RLock()
		next.ServeHTTP(rec, r)
		mu.RUnlock()
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func ensureBucket(backend gofakes3.Backend, name string) error {
	ok, err := backend.BucketExists(name)
	if err != nil || ok {
		return err
	}
	if err := backend.CreateBucket(name); err != nil && !gofakes3.IsAlreadyExists(err) {
		return fmt.Errorf("create bucket %q: %w", name, err)
	}
	return nil
}

// CreateBucket creates a bucket if it does not exist.
func (s *Server) CreateBucket(name string) error { return ensureBucket(s.backend, name) }

// Endpoint is the server's base URL, e.g. http://127.0.0.1:41234.
func (s *Server) Endpoint() string { return "http://" + s.listener.Addr().String() }

// BucketURL is the gocloud storage URL of bucket on this server.
func (s *Server) BucketURL(bucket string) string { return BucketURL(s.Endpoint(), bucket) }

// Close stops the server at once (open connections are closed) and closes a database that
// New opened.
func (s *Server) Close() error {
	err := s.http.Close()
	if s.closeDB != nil {
		if cerr := s.closeDB(); err == nil {
			err = cerr
		}
		s.closeDB = nil
	}
	return err
}

// BucketURL builds the gocloud s3blob URL walkeeper takes as its storage root for an
// S3-compatible endpoint with path-style addressing:
//
//	s3://BUCKET?endpoint=http://HOST:PORT&region=us-east-1&use_path_style=true&disable_https=true
//
// The endpoint is left unescaped for readability; url.Parse reads it back unchanged.
func BucketURL(endpoint, bucket string) string {
	s := fmt.Sprintf("s3://%s?endpoint=%s&region=%s&use_path_style=true", bucket, endpoint, Region)
	if u, err := url.Parse(endpoint); err == nil && u.Scheme == "http" {
		s += "&disable_https=true"
	}
	return s
}

// SetCredentials points the AWS SDK's default credential chain at the static test
// credentials for the rest of the test, and keeps it away from shared config files and the
// EC2 metadata endpoint (which would otherwise be probed when no credentials are set).
func SetCredentials(t testing.TB) {
	t.Helper()
	for k, v := range Env() {
		t.Setenv(k, v)
	}
}

// Env is the environment SetCredentials sets, for processes started by hand.
func Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":       SecretAccessKey,
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  Region,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             "/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_PROFILE":                 "",
	}
}

// StartEngines starts one server per storage engine walkeeper's tests rely on, named after
// it: "s3mem" (in memory, the tests' default) and "s3bolt" (a bbolt file, unsynced). The
// credentials are set as by SetCredentials, and the servers stop when the test ends.
func StartEngines(t testing.TB) map[string]*Server {
	t.Helper()
	SetCredentials(t)
	return map[string]*Server{
		"s3mem":  startServer(t, Options{}),
		"s3bolt": startServer(t, Options{BoltPath: filepath.Join(t.TempDir(), "s3.db")}),
	}
}

// startServer starts a server with opts that stops when the test ends.
func startServer(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("s3test: start server: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Start starts an in-memory server for the test with one fresh, randomly named bucket and
// returns that bucket's gocloud URL (see BucketURL). Credentials are set as by SetCredentials.
func Start(t testing.TB) (url string) {
	t.Helper()
	SetCredentials(t)
	bucket := NewBucketName()
	return startServer(t, Options{Buckets: []string{bucket}}).BucketURL(bucket)
}

// NewBucketName returns a valid, random bucket name: "walkeeper-test-" + RandomName().
func NewBucketName() string { return "walkeeper-test-" + RandomName() }

// RandomName is 12 random lower-case letters and digits, valid in S3, GCS and Azure bucket
// (container) names.
func RandomName() string { return strings.ToLower(rand.Text()[:12]) }
