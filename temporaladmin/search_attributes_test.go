package temporaladmin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
)

// TestWhileNamespaceUnservedIsBounded: EnsureSearchAttributes rides out the seconds in which
// a fresh namespace is not yet served by the operator API, and no longer: then it fails with
// the server's NamespaceNotFound, wrapped with what to do.
func TestWhileNamespaceUnservedIsBounded(t *testing.T) {
	ctx := context.Background()
	calls := 0
	err := whileNamespaceUnserved(ctx, "fresh", time.Minute, func() error {
		if calls++; calls < 3 {
			return serviceerror.NewNamespaceNotFound("fresh")
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, calls, "served on the third call")

	other := errors.New("permission denied")
	require.ErrorIs(t, whileNamespaceUnserved(ctx, "x", time.Minute, func() error { return other }), other)

	start := time.Now()
	err = whileNamespaceUnserved(ctx, "missing", time.Second, func() error { return serviceerror.NewNamespaceNotFound("missing") })
	require.ErrorAs(t, err, new(*serviceerror.NamespaceNotFound))
	require.ErrorContains(t, err, "temporal operator namespace create -n missing")
	require.Less(t, time.Since(start), 30*time.Second, "gave up after about the 1 s bound")
}
