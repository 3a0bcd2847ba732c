// Package target is the identity of a store: its Kind, its Name and the Target "<kind>:<name>"
// that every layer (store/, the Temporal contract, the HTTP and CLI front ends) uses to
// name it, with the name rules they share. It is a leaf: it imports no walkeeper package,
// so the deterministic workflow code can parse targets without linking the store.
package target

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ErrInvalidInput marks a malformed kind, name or target; retrying the same input never
// helps. store.ErrInvalidInput is this same value, so errors.Is holds across both.
var ErrInvalidInput = errors.New("invalid input")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// Kind is a store kind. The set is closed: see Kinds.
type Kind string

// The store kinds (docs/DESIGN.md §2).
const (
	// KindRollout stores RL rollout records under a fixed schema keyed by "id".
	KindRollout Kind = "rollout"
	// KindGeneric stores rows of a schema declared at create time, keyed by "id".
	KindGeneric Kind = "generic"
	// KindDatagen stores data-generation events keyed by a derived "event_id".
	KindDatagen Kind = "datagen"
)

// Kinds lists every kind in a stable order.
var Kinds = []Kind{KindRollout, KindGeneric, KindDatagen}

// maxNameLen bounds store names (docs/DESIGN.md §2: one leading character plus up to 127 more).
const maxNameLen = 128

// reservedNames are names no store may take: they are directories of the storage layout.
var reservedNames = map[string]bool{"_registry": true, "_stats": true}

// ParseKind returns the kind named s; an unknown kind is ErrInvalidInput.
func ParseKind(s string) (Kind, error) {
	if k := Kind(s); slices.Contains(Kinds, k) {
		return k, nil
	}
	return "", invalidf("unknown store kind %q (want one of rollout, generic, datagen)", Clip(s))
}

// ValidateName checks a store name: [A-Za-z0-9_][A-Za-z0-9._-]{0,127}, not one of the reserved
// names _registry and _stats, and never containing "..". "/" and ":" can never occur because
// the character set excludes them, so a valid name is always a single, non-traversing path
// segment. Errors wrap ErrInvalidInput.
func ValidateName(name string) error {
	if p := nameProblem(name); p != "" {
		return invalidf("store name %q: %s", Clip(name), p)
	}
	return nil
}

// nameProblem describes what is wrong with name, or returns "" when it is valid.
func nameProblem(name string) string {
	if name == "" {
		return "empty"
	}
	if len(name) > maxNameLen {
		return fmt.Sprintf("%d bytes long, at most %d allowed", len(name), maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
		if i > 0 {
			ok = ok || c == '.' || c == '-'
		}
		if !ok {
			if i == 0 {
				return "must start with a letter, digit or '_'"
			}
			return fmt.Sprintf("byte %q at offset %d is not allowed (use A-Z a-z 0-9 _ . -)", c, i)
		}
	}
	if strings.Contains(name, "..") {
		return `must not contain ".."`
	}
	if reservedNames[name] {
		return "reserved"
	}
	return ""
}

// Target names one store: "<kind>:<name>", e.g. "generic:gs".
type Target struct {
	Kind Kind
	Name string
}

// ParseTarget parses "<kind>:<name>" strictly: the kind must be known and the name valid
// (ValidateName); nothing is trimmed or normalised, so on success t.String() == s.
func ParseTarget(s string) (Target, error) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok {
		return Target{}, invalidf("target %q: want <kind>:<name>, e.g. generic:gs", Clip(s))
	}
	k, err := ParseKind(kind)
	if err != nil {
		return Target{}, invalidf("target %q: unknown kind %q (want one of rollout, generic, datagen)", Clip(s), Clip(kind))
	}
	if p := nameProblem(name); p != "" {
		return Target{}, invalidf("target %q: store name %q: %s", Clip(s), Clip(name), p)
	}
	return Target{Kind: k, Name: name}, nil
}

// Validate reports whether t names a valid store (known kind, valid name); ErrInvalidInput.
func (t Target) Validate() error {
	if _, err := ParseKind(string(t.Kind)); err != nil {
		return err
	}
	return ValidateName(t.Name)
}

// String returns "<kind>:<name>"; the zero Target is "".
func (t Target) String() string {
	if t == (Target{}) {
		return ""
	}
	return string(t.Kind) + ":" + t.Name
}

// Path returns "<kind>/<name>", used in workflow IDs and storage prefixes.
func (t Target) Path() string {
	return string(t.Kind) + "/" + t.Name
}

// MarshalText encodes t as "<kind>:<name>" (the zero Target as ""), so a Target in a JSON
// document reads "generic:gs" as docs/API.md shows.
func (t Target) MarshalText() ([]byte, error) {
	return []byte(t.String()), nil
}

// ShardID is the shard id of a writer process: a pure function of its stable instance id
// (a name-based UUID), or "default" for the empty instance id.
func ShardID(instanceID string) string {
	if instanceID == "" {
		return "default"
	}
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(instanceID)).String()
}

// Clip bounds user-supplied text quoted in error messages to 64 bytes, cut at a character
// boundary, and "...".
func Clip(s string) string {
	n := 64
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
