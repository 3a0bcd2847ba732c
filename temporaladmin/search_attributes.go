package temporaladmin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
)

// EnsureSearchAttributes registers walkeeper's search attributes in namespace ns through the
// operator API, idempotent and safe to race; one registered with another type is an
// ErrSearchAttributeType, since the workflows would fail their tasks forever. Needs operator
// permissions (on Temporal Cloud register them with tcld).
func EnsureSearchAttributes(ctx context.Context, c client.Client, ns string) error {
	ns = cmp.Or(ns, DefaultNamespace)
	var missing map[string]enumspb.IndexedValueType
	err := whileNamespaceUnserved(ctx, ns, namespaceServeWait, func() error {
		var err error
		missing, err = missingSearchAttributes(ctx, c, ns)
		if err != nil || len(missing) == 0 {
			return err
		}
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			SearchAttributes: missing,
			Namespace:        ns,
		})
		if err != nil && !errors.As(err, new(*serviceerror.AlreadyExists)) {
			return fmt.Errorf("add search attributes %s in namespace %s: %w", saNames(missing), ns, err)
		}
		return nil
	})
	if err != nil || len(missing) == 0 {
		return err
	}
	// The frontend caches the search-attribute map; wait (bounded) until it lists them all
	// so that the first workflow started after this call can use them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing, err = missingSearchAttributes(ctx, c, ns)
		switch {
		case err != nil:
			return err
		case len(missing) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("search attributes %s still missing in namespace %s after registration", saNames(missing), ns)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// namespaceServeWait bounds how long EnsureSearchAttributes waits for a namespace the
// operator API does not serve yet, which it does only after the frontend's registry refresh
// (10 s by default, docs/TEMPORAL.md).
const namespaceServeWait = 45 * time.Second

// whileNamespaceUnserved runs f until it returns anything but NamespaceNotFound, for at most
// within; then the NamespaceNotFound is returned, wrapped with what to do about it.
func whileNamespaceUnserved(ctx context.Context, ns string, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if !errors.As(err, new(*serviceerror.NamespaceNotFound)) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s is not served after %s: create it (temporal operator namespace create -n %s) or check --namespace: %w", ns, within, ns, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for namespace %s to be served: %w (last: %v)", ns, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func missingSearchAttributes(ctx context.Context, c client.Client, ns string) (map[string]enumspb.IndexedValueType, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("list search attributes in namespace %s: %w", ns, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	var wrong []string
	for _, name := range slices.Sorted(maps.Keys(contract.SearchAttributes)) {
		typ := contract.SearchAttributes[name]
		have, ok := resp.GetCustomAttributes()[name]
		if !ok {
			have, ok = resp.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing[name] = typ
		case have != typ:
			wrong = append(wrong, fmt.Sprintf("search attribute %s is registered as %s in namespace %s, walkeeper needs %s", name, have, ns, typ))
		}
	}
	if len(wrong) > 0 {
		return nil, fmt.Errorf("%w: %s: every merge or compaction that sets one would fail its workflow task until its run timeout; remove each (temporal operator search-attribute remove -n %s --name NAME) and start a worker again, which registers them",
			ErrSearchAttributeType, strings.Join(wrong, "; "), ns)
	}
	return missing, nil
}

// ErrSearchAttributeType marks a walkeeper search attribute registered with another type in
// the namespace, which no retry and no worker changes.
var ErrSearchAttributeType = errors.New("a walkeeper search attribute is registered with another type")

func saNames(m map[string]enumspb.IndexedValueType) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ",")
}
