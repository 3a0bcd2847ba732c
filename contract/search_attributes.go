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

// Typed search attribute keys. MergeWal and CompactBase carry WalTarget and WalKind from the
// start (and upsert them when a bare CLI start left them out); MergeWal keeps WalPending
// current as it merges.
var (
	WalTarget  = temporal.NewSearchAttributeKeyKeyword(WalTargetName)
	WalKind    = temporal.NewSearchAttributeKeyKeyword(WalKindName)
	WalPending = temporal.NewSearchAttributeKeyInt64(WalPendingName)
)

// SearchAttributes lists the custom search attributes walkeeper uses, for registration with
// the operator API on worker start.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	WalTargetName:  enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	WalKindName:    enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	WalPendingName: enumspb.INDEXED_VALUE_TYPE_INT,

	WalTriggerName:        enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	WalPendingAtStartName: enumspb.INDEXED_VALUE_TYPE_INT,
	WalReclaimedName:      enumspb.INDEXED_VALUE_TYPE_INT,
	WalBytesMergedName:    enumspb.INDEXED_VALUE_TYPE_DOUBLE,

	WalSweepStartsName: enumspb.INDEXED_VALUE_TYPE_DOUBLE, // SweepWindow, contract/sweep_window.go
}
