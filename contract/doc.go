// Package contract is walkeeper's Temporal contract, the one package both sides import:
// package workflows orchestrates against it and package activities implements it.
//
// It holds the workflow and activity type names, the task queues and workflow IDs, one
// params and one result struct per workflow and activity, the status query payloads, the
// application error types that cross Temporal, the search attributes, and the client-side
// start helpers (StartMergeWal, StartCompactBase) through which every trigger starts a
// workflow, so they all dedupe on the same ID.
//
// It is a leaf: it imports only the Temporal SDK and package target, never store/, so the
// deterministic workflow code links neither the store nor its Arrow and cloud dependencies.
// What the store hands over (a prepared merge) crosses as a wire type declared here
// (wire.go) and converted by package activities at the boundary, so renaming a store field
// cannot silently change a recorded history.
//
// Every struct here crosses a Temporal payload as JSON, so recorded histories and running
// workflows depend on its shape: fields may be added, never renamed or retagged
// (wire_test.go pins the shape against testdata/wire).
package contract
