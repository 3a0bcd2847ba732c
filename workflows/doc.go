// Package workflows holds walkeeper's deterministic orchestration: MergeWal, CompactBase,
// MaintenanceSweep and MergeWalTick.
//
// The contract they run against (names, IDs, params and results, error types, search
// attributes, the start helpers) is package contract; the store is reached only through
// activities, called by name. So this package imports neither store/ nor activities/, and
// nothing here does I/O from workflow code.
package workflows
