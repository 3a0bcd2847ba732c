package s3test

import (
	"bytes"
	"io"
	"maps"
	"sync"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	bolt "go.etcd.io/bbolt"
)

// boltBackend works around a bug of gofakes3's s3bolt backend (v1.2.0). Its GetObject and
// HeadObject decode the stored object with mgo's bson, whose []byte fields alias the bbolt
// page they were decoded from, and return it after the read transaction has ended. A write
// that reuses the page meanwhile changes the bytes a reader is still sending, and the client
// sees a body that does not match its checksum. The PutAtomicReplace conformance check hit it
// once on a loaded machine.
//
// Here reads run exclusive of writes and copy the object before writes resume, so nothing
// handed out aliases bbolt's memory.
type boltBackend struct {
	gofakes3.Backend
	mu sync.RWMutex
}

func newBoltBackend(db *bolt.DB) *boltBackend {
	return &boltBackend{Backend: s3bolt.New(db)}
}

// detach copies obj's contents, hash and metadata out of bbolt's memory.
// REQUIRES: no write reaches the bbolt database until it returns (the caller holds
// boltBackend.mu).
func detach(obj *gofakes3.Object) (*gofakes3.Object, error) {
	if obj == nil {
		return nil, nil
	}
	c := *obj
	c.Hash = bytes.Clone(obj.Hash)
	c.Metadata = maps.Clone(obj.Metadata)
	if obj.Contents != nil {
		data, err := io.ReadAll(obj.Contents)
		_ = obj.Contents.Close()
		if err != nil {
			return nil, err
		}
		c.Contents = io.NopCloser(bytes.NewReader(data))
	}
	return &c, nil
}

func (b *boltBackend) GetObject(bucket, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	obj, err := b.Backend.GetObject(bucket, key, rng)
	if err != nil {
		return nil, err
	}
	return detach(obj)
}

func (b *boltBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	obj, err := b.Backend.HeadObject(bucket, key)
	if err != nil {
		return nil, err
	}
	return detach(obj)
}

func (b *boltBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.PutObject(bucket, key, meta, input, size, cond)
}

func (b *boltBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.DeleteObject(bucket, key)
}

func (b *boltBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.DeleteMulti(bucket, keys...)
}

func (b *boltBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.CopyObject(srcBucket, srcKey, dstBucket, dstKey, meta)
}

func (b *boltBackend) CreateBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.CreateBucket(name)
}

func (b *boltBackend) DeleteBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.DeleteBucket(name)
}

func (b *boltBackend) ForceDeleteBucket(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Backend.ForceDeleteBucket(name)
}
