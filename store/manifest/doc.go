// Package manifest is the model of a store's manifests: the JSON objects docs/FORMAT.md
// documents (the base table's versions, each shard's manifest, registry entries, store
// metadata, merge claims), the pure functions over them (drafting the next version,
// watermark arithmetic) and their JSON codec without reflection. It does no I/O and knows
// neither buckets nor the engine: package store loads, checks and publishes them.
package manifest
