// Package rowcodec is a store's schema and its rows in their three forms: the JSON a client
// appends, Row in memory, and the Arrow records the store writes. It knows nothing of
// buckets, manifests or the engine.
package rowcodec
