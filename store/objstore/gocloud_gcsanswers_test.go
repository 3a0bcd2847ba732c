package objstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	raw "google.golang.org/api/storage/v1"
)

// gcsListPage is a GCS objects.list answer of n entries, each with the fields GCS sends for
// an object of walkeeper's.
func gcsListPage(tb testing.TB, n int) []byte {
	tb.Helper()
	type object struct {
		Kind, ID, SelfLink, MediaLink, Name, Bucket, Generation, Metageneration string
		ContentType, StorageClass, Size, Md5Hash, Crc32c, Etag                  string
		TimeCreated, Updated, TimeStorageClassUpdated                           string
	}
	page := struct {
		Kind  string   `json:"kind"`
		Items []object `json:"items"`
	}{Kind: "storage#objects"}
	for i := range n {
		name := fmt.Sprintf("tables/t/wal/s%07d/%020d.wal", i%16, i)
		page.Items = append(page.Items, object{
			Kind: "storage#object", ID: "b/" + name + "/1767225600000000", Name: name, Bucket: "b",
			SelfLink:   "https://www.googleapis.com/storage/v1/b/b/o/" + name,
			MediaLink:  "https://storage.googleapis.com/download/storage/v1/b/b/o/" + name + "?generation=1767225600000000&alt=media",
			Generation: "1767225600000000", Metageneration: "1", ContentType: "application/octet-stream",
			StorageClass: "STANDARD", Size: "123456", Md5Hash: "1B2M2Y8AsgTpgAmY7PhCfg==",
			Crc32c: "AAAAAA==", Etag: "CIDk9pC3yJEDEAE=", TimeCreated: "2026-01-01T00:00:00.000Z",
			Updated: "2026-01-01T00:00:00.000Z", TimeStorageClassUpdated: "2026-01-01T00:00:00.000Z",
		})
	}
	body, err := json.Marshal(page)
	require.NoError(tb, err)
	return body
}

// BenchmarkGCSListPageDecode compares what checkGCSAnswer costs a list page of 1,000 entries
// (gcsblob's page size) with what the GCS client's own decoding of it costs, which the check
// adds to (docs/STORAGE.md §4).
//
//	go test -run '^$' -bench BenchmarkGCSListPageDecode -benchmem ./store/objstore/
func BenchmarkGCSListPageDecode(b *testing.B) {
	body := gcsListPage(b, 1000)
	req := httptest.NewRequest(http.MethodGet, "http://gcs/storage/v1/b/b/o?maxResults=1000", nil)
	b.Run("check", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for range b.N {
			if err := checkGCSAnswer(req, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("client", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for range b.N {
			var page raw.Objects
			if err := json.Unmarshal(body, &page); err != nil || len(page.Items) != 1000 {
				b.Fatal(len(page.Items), err)
			}
		}
	})
}
