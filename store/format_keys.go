package store

import (
	"math"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Parsing the keys walkeeper writes (format.go): a storage root is shared with whatever else
// writes to it, so every listing recognises its own keys exactly and treats anything else as
// foreign (foreign.go), never stopping on it nor reading, replaying or deleting it.

// maxCounter is the largest version, WAL position, generation number or writer epoch a key or
// manifest may hold, so that every value can be incremented without wrapping uint64.
const maxCounter = math.MaxInt64

// parseCounter parses a decimal counter in [0, maxCounter] written with width digits
// (%0<width>d), or in its shortest form when width is 0 (%d).
func parseCounter(s string, width int) (uint64, bool) {
	if s == "" || len(s) > 20 || (width > 0 && len(s) != width) || (width == 0 && len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64) // base 10: digits only, no sign or underscores
	if err != nil || v > maxCounter {
		return 0, false
	}
	return v, true
}

// parseSeqName parses prefix + <n %020d> + suffix, n >= 1 (version 0 is the empty chain and
// WAL position 0 is never written): a version or a WAL position.
func parseSeqName(prefix, key, suffix string) (uint64, bool) {
	name, inPrefix := strings.CutPrefix(key, prefix)
	digits, suffixed := strings.CutSuffix(name, suffix)
	v, ok := parseCounter(digits, 20)
	return v, inPrefix && suffixed && ok && v >= 1
}

// parseVersionKey is the version of the chain object key under prefix (versionName).
func parseVersionKey(prefix, key string) (uint64, bool) { return parseSeqName(prefix, key, ".json") }

// parseWALKey is the position of the WAL object key under prefix (walKey).
func parseWALKey(prefix, key string) (uint64, bool) { return parseSeqName(prefix, key, ".arrow") }

// parseGenKey is the generation number and writer epoch of the generation file key under
// prefix (genPrefix): prefix + <g %020d>-<epoch %d>.arrow (genKey).
func parseGenKey(prefix, key string) (gen, epoch uint64, ok bool) {
	name, inPrefix := strings.CutPrefix(key, prefix)
	stem, suffixed := strings.CutSuffix(name, ".arrow")
	g, e, cut := strings.Cut(stem, "-")
	gen, genOK := parseCounter(g, 20)
	epoch, epochOK := parseCounter(e, 0)
	if !inPrefix || !suffixed || !cut || !genOK || !epochOK {
		return 0, 0, false
	}
	return gen, epoch, true
}

// parseRegistryKey is the store name of a registry entry of kind (registryKey). A nested key
// (_registry/<kind>/a/b) is not an entry: the name would have a "/" in it.
func parseRegistryKey(kind Kind, key string) (string, bool) {
	name, inPrefix := strings.CutPrefix(key, registryPrefix(kind))
	name, suffixed := strings.CutSuffix(name, ".json")
	if !inPrefix || !suffixed || ValidateName(name) != nil {
		return "", false
	}
	return name, true
}

// parseStagedRunKey splits the data key of a staged run of t, dataKey of
// "m-<hash>-<shard tag>-<from>-<through>", into its shard tag and generation range.
func parseStagedRunKey(t Target, key string) (tag string, from, through uint64, ok bool) {
	name, inPrefix := strings.CutPrefix(key, dataPrefix(t)+stagedRunNamePrefix)
	name, suffixed := strings.CutSuffix(name, ".parquet")
	parts := strings.Split(name, "-")
	if !inPrefix || !suffixed || len(parts) != 4 || !isHashKey(parts[0]) || parts[1] == "" {
		return "", 0, 0, false
	}
	from, ok1 := parseCounter(parts[2], 0)
	through, ok2 := parseCounter(parts[3], 0)
	if !ok1 || !ok2 || from > through || from == 0 {
		return "", 0, 0, false
	}
	return parts[1], from, through, true
}

// isHashName reports whether key is prefix + a name hashKey or randomHex makes + suffix: an
// attempt claim under its claimPrefix (".json"), or a compaction output (isCompactRunKey).
func isHashName(prefix, key, suffix string) bool {
	h, inPrefix := strings.CutPrefix(key, prefix)
	h, suffixed := strings.CutSuffix(h, suffix)
	return inPrefix && suffixed && isHashKey(h)
}

// isHashKey reports whether h is a name hashKey makes: 24 lower-case hex digits.
func isHashKey(h string) bool {
	return len(h) == 24 && strings.Trim(h, "0123456789abcdef") == ""
}

// IsShardID reports whether name is a shard id as ShardID makes them, a UUID in its canonical
// lower-case form or the id of an empty instance id: a directory under _mem_wal/ that is not
// is foreign, and a StatsPage cursor must be one.
func IsShardID(name string) bool {
	if name == ShardID("") {
		return true
	}
	u, err := uuid.Parse(name)
	return err == nil && u.String() == name
}
