package objstore_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// TestS3LargeObjectsAndMultipartPreconditions: objects of 16 MiB and more (the AWS SDK
// transfer manager's multipart threshold) go up as multipart uploads, and the precondition then rides on
// CompleteMultipartUpload. A large WAL object or staged run published with PutIfAbsent must
// still lose cleanly to an existing key.
//
// The precondition is enforced by the wrapper in front of every gofakes3 backend, so one
// backend suffices here (17 MiB uploads are slow under the race detector).
func TestS3LargeObjectsAndMultipartPreconditions(t *testing.T) {
	ctx := context.Background()
	for name, open := range s3Openers(t) {
		if name == "s3bolt" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			b := open(t)
			big := bytes.Repeat([]byte("0123456789abcdef"), (17<<20)/16+7) // > 17 MiB: 3 parts, not aligned
			other := bytes.Repeat([]byte{'z'}, len(big)+100)

			require.NoError(t, b.PutIfAbsent(ctx, "big/wal", big))
			require.ErrorIs(t, b.PutIfAbsent(ctx, "big/wal", other), objstore.ErrAlreadyExists)
			got, err := b.Get(ctx, "big/wal")
			require.NoError(t, err)
			require.True(t, bytes.Equal(big, got), "winner's bytes intact")

			// A small object first, then a large conditional write: still refused.
			require.NoError(t, b.Put(ctx, "big/small-first", []byte("s")))
			require.ErrorIs(t, b.PutIfAbsent(ctx, "big/small-first", big), objstore.ErrAlreadyExists)

			// Large plain Put replaces whole.
			require.NoError(t, b.Put(ctx, "big/wal", other))
			got, err = b.Get(ctx, "big/wal")
			require.NoError(t, err)
			require.True(t, bytes.Equal(other, got))
			objs, err := b.List(ctx, "big/")
			require.NoError(t, err)
			require.Len(t, objs, 2)
		})
	}
}
