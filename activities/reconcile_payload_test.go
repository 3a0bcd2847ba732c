package activities

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

// A reconcile page whose every listed problem quotes a long error of characters JSON
// escapes (an XML error body: '<', '>', '&') fits a payload, and so does the reconcile's
// carry of them, where each kept 4 KiB of text that escaping made up to 24 KiB: the page
// failed PayloadTooLarge, and so did every reconcile reaching it.
func TestFindingReconcileProblemsOfEscapedErrorsFitTheirPayload(t *testing.T) {
	body := errors.New("get manifest: " + strings.Repeat("<Error><Code>&</Code></Error>\x01", contract.MaxPayloadBytes/16))
	page := contract.ReconcilePageResult{Kind: "generic", Next: "generic:" + strings.Repeat("n", 128),
		Counts: contract.ReconcileCounts{Stores: contract.MaxReconcilePage, Unreadable: contract.MaxReconcilePage, Pages: 1}}
	for i := range contract.MaxReconcileUnreadable {
		page.Problems = append(page.Problems, storeProblem(fmt.Sprintf("generic:%s%04d", strings.Repeat("n", 124), i), body))
	}
	raw, err := json.Marshal(page)
	require.NoError(t, err)
	t.Logf("page of %d problems: %d bytes", len(page.Problems), len(raw))
	require.LessOrEqual(t, len(raw), contract.MaxPayloadBytes)
	require.NoError(t, guardPayload(contract.ReconcilePageActivity, page))

	// The workflow carries them, cut by FailureText, into its continued input and its result.
	in := contract.ReconcileDemandInput{Cursor: contract.ReconcileCursor{KindIndex: 1, After: strings.Repeat("n", 128)},
		Totals: page.Counts, Runs: contract.MaxCarriedRuns - 1}
	for _, p := range page.Problems {
		p.Error = contract.FailureText(p.Error)
		in.Problems = append(in.Problems, p)
	}
	require.NoError(t, in.Validate())
	raw, err = json.Marshal(in)
	require.NoError(t, err)
	t.Logf("carried input: %d bytes", len(raw))
	require.LessOrEqual(t, len(raw), contract.MaxPayloadBytes)
}
