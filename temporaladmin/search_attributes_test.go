package temporaladmin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
	if err != nil || calls != 3 {
		t.Fatalf("served on the third call: err %v after %d calls, want nil after 3", err, calls)
	}

	other := errors.New("permission denied")
	if err := whileNamespaceUnserved(ctx, "x", time.Minute, func() error { return other }); !errors.Is(err, other) {
		t.Fatalf("another error = %v, want it returned at once", err)
	}

	start := time.Now()
	err = whileNamespaceUnserved(ctx, "missing", time.Second, func() error { return serviceerror.NewNamespaceNotFound("missing") })
	var notFound *serviceerror.NamespaceNotFound
	if !errors.As(err, &notFound) || !strings.Contains(err.Error(), "temporal operator namespace create -n missing") {
		t.Fatalf("never served = %v, want the NamespaceNotFound with the fix", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("gave up after %s, want about the 1 s bound", d)
	}
}
