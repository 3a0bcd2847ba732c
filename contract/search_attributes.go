package contract

import (
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// Search attribute names (docs/DESIGN.md §4).
const (
	WalTargetName  = "WalTarget"
	WalKindName    = "WalKind"
	WalPendingName = "WalPending"
)

// Typed search attribute keys: WalTarget and WalKind from the start (upserted when a bare
// start left them out), WalPending kept current as MergeWal merges.
var (
	WalTarget  = temporal.NewSearchAttributeKeyKeyword(WalTargetName)
	WalKind    = temporal.NewSearchAttributeKeyKeyword(WalKindName)
	WalPending = temporal.NewSearchAttributeKeyInt64(WalPendingName)
)

// SearchAttributes lists the custom search attributes walkeeper uses, each with the type its
// typed key declares, for registration with the operator API on worker start.
var SearchAttributes = valueTypes(WalTarget, WalKind, WalPending,
	WalTrigger, WalPendingAtStart, WalReclaimed, WalBytesMerged, // contract/observe.go
	WalSweepStarts) // SweepWindow, contract/sweep_window.go

// valueTypes maps each key's name to the value type it declares.
func valueTypes(keys ...temporal.SearchAttributeKey) map[string]enumspb.IndexedValueType {
	types := make(map[string]enumspb.IndexedValueType, len(keys))
	for _, k := range keys {
		types[k.GetName()] = k.GetValueType()
	}
	return types
}
