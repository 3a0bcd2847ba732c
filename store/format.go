package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
)

// FormatVersion is written into every store.json. Readers refuse a newer major format.
const FormatVersion = 1

// Object layout: the table of docs/FORMAT.md names every key the helpers below build.
const (
	registryDir = "_registry"
	versionsDir = "_versions"
	dataDir     = "data"
	memWALDir   = "_mem_wal"
)

func registryPrefix(kind Kind) string { return path.Join(registryDir, string(kind)) + "/" }
func registryKey(t Target) string     { return registryPrefix(t.Kind) + t.Name + ".json" }
func storePrefix(t Target) string     { return path.Join(string(t.Kind), t.Name) }
func storeMetaKey(t Target) string {
	return path.Join(storePrefix(t), "store.json")
}
func versionsPrefix(t Target) string { return path.Join(storePrefix(t), versionsDir) + "/" }
func memWALPrefix(t Target) string   { return path.Join(storePrefix(t), memWALDir) + "/" }
func shardPrefix(t Target, shard string) string {
	return path.Join(storePrefix(t), memWALDir, shard) + "/"
}
func shardManifestPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "manifest/" }
func walKey(t Target, shard string, pos uint64) string {
	return fmt.Sprintf("%swal/%020d.arrow", shardPrefix(t, shard), pos)
}
func walPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "wal/" }
func genKey(t Target, shard string, gen, epoch uint64) string {
	return fmt.Sprintf("%sgen/%020d-%d.arrow", shardPrefix(t, shard), gen, epoch)
}
func genPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "gen/" }

func claimPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "attempts/" }
func dataPrefix(t Target) string                { return path.Join(storePrefix(t), dataDir) + "/" }
func dataKey(t Target, id string) string        { return dataPrefix(t) + id + ".parquet" }

// versionName formats a version number so that lexical order equals numeric order.
func versionName(v uint64) string { return fmt.Sprintf("%020d.json", v) }

// hashKey is a short stable hash of parts, for object names derived from idempotency keys:
// a retried attempt names its files the same way.
func hashKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

// attemptKey is key, or a random attempt key for library callers that never retry ("").
func attemptKey(key string) string {
	if key != "" {
		return key
	}
	return "local-" + randomHex()
}

// randomHex is 96 random bits as 24 lower-case hex digits, the form of hashKey's names.
func randomHex() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
