package contract

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attribute names (docs/DESIGN.md §4): what a run says about itself in Temporal
// visibility, so an operator can judge it from a list view (docs/TEMPORAL.md). SQL visibility
// offers only 3 custom Int attributes per namespace, so WalBytesMerged is a Double.
const (
	WalTargetName  = "WalTarget"
	WalKindName    = "WalKind"
	WalPendingName = "WalPending"
	// WalTriggerName (Keyword) says what started the run: one of Triggers.
	WalTriggerName = "WalTrigger"
	// WalPendingAtStartName (Int) is the store's pending generations when the run started;
	// unlike WalPending, which the chain's end sets to what is left, it keeps that figure, so
	// a finished run still shows how far behind the store was.
	WalPendingAtStartName = "WalPendingAtStart"
	// WalReclaimedName (Int) is the generations the run reclaimed, set when it finishes.
	WalReclaimedName = "WalReclaimed"
	// WalBytesMergedName (Double) is the WAL bytes the run folded into the base table.
	WalBytesMergedName = "WalBytesMerged"
	// WalPassesName is the merge passes the run made over all shards. Not registered as a
	// search attribute (no Int slot left on SQL visibility): the passes are in the memo only.
	WalPassesName = "WalPasses"
)

// Typed search attribute keys: WalTarget, WalKind and WalTrigger from the start (upserted when
// a bare start left them out), WalPending and WalPendingAtStart at start when the starter
// knows the debt, the others, and WalPending again, once the merge's chain has finished.
var (
	WalTarget         = temporal.NewSearchAttributeKeyKeyword(WalTargetName)
	WalKind           = temporal.NewSearchAttributeKeyKeyword(WalKindName)
	WalPending        = temporal.NewSearchAttributeKeyInt64(WalPendingName)
	WalTrigger        = temporal.NewSearchAttributeKeyKeyword(WalTriggerName)
	WalPendingAtStart = temporal.NewSearchAttributeKeyInt64(WalPendingAtStartName)
	WalReclaimed      = temporal.NewSearchAttributeKeyInt64(WalReclaimedName)
	WalBytesMerged    = temporal.NewSearchAttributeKeyFloat64(WalBytesMergedName)
)

// SearchAttributes lists the custom search attributes walkeeper uses, each with the type its
// typed key declares, for registration with the operator API on worker start.
var SearchAttributes = valueTypes(WalTarget, WalKind, WalPending, WalTrigger, WalPendingAtStart, WalReclaimed,
	WalBytesMerged, WalSweepStarts) // SweepWindow's, contract/sweep_window.go

// valueTypes maps each key's name to the value type it declares.
func valueTypes(keys ...temporal.SearchAttributeKey) map[string]enumspb.IndexedValueType {
	types := make(map[string]enumspb.IndexedValueType, len(keys))
	for _, k := range keys {
		types[k.GetName()] = k.GetValueType()
	}
	return types
}
