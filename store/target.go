package store

import "github.com/walkeeper/walkeeper/target"

// A store's identity and name rules live in the leaf package target, which the Temporal
// contract shares without linking the store; these aliases keep callers reading store.Target.
type (
	Kind   = target.Kind
	Target = target.Target
)

// The store kinds; see package target.
const (
	KindRollout = target.KindRollout
	KindGeneric = target.KindGeneric
	KindDatagen = target.KindDatagen
)

// Kinds lists every kind in a stable order (target.Kinds).
var Kinds = target.Kinds

// ParseKind returns the kind named s (target.ParseKind).
func ParseKind(s string) (Kind, error) { return target.ParseKind(s) }

// ValidateName checks a store name (target.ValidateName).
func ValidateName(name string) error { return target.ValidateName(name) }

// ParseTarget parses "<kind>:<name>" strictly (target.ParseTarget).
func ParseTarget(s string) (Target, error) { return target.ParseTarget(s) }

// ShardID is the shard id of a writer process (target.ShardID).
func ShardID(instanceID string) string { return target.ShardID(instanceID) }
