package target

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
)

func TestParseKind(t *testing.T) {
	for _, k := range Kinds {
		got, err := ParseKind(string(k))
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	if len(Kinds) != 3 || Kinds[0] != KindRollout || Kinds[1] != KindGeneric || Kinds[2] != KindDatagen {
		t.Errorf("Kinds = %v, want [rollout generic datagen]", Kinds)
	}
	for _, s := range []string{"", "Generic", "GENERIC", "bogus", " generic", "generic ", "_registry"} {
		_, err := ParseKind(s)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParseKind(%q) error = %v, want ErrInvalidInput", s, err)
		}
	}
}

func TestValidateName(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, name := range []string{"gs", "a", "_", "_x", "0", "9lives", "a.b", "a-b", "a_b", "A.b-C_d.9", "x.", "x-", long, "registry", "_registry2", "stats"} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	cases := []struct{ name, want string }{
		{"", "empty"},
		{long + "a", "129 bytes"},
		{"..", "start with"},
		{".", "start with"},
		{".hidden", "start with"},
		{"-x", "start with"},
		{"a..b", `".."`},
		{"a...", `".."`},
		{"a/b", "'/'"},
		{"../x", "start with"},
		{"a:b", "':'"},
		{"a b", "' '"},
		{"a\\b", `'\\'`},
		{"a\x00b", `'\x00'`},
		{"é", "start with"},
		{"aé", "not allowed"},
		{"_registry", "reserved"},
		{"_stats", "reserved"},
	}
	for _, c := range cases {
		err := ValidateName(c.name)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalidInput", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateName(%q) = %q, want it to mention %s", c.name, err, c.want)
		}
	}
}

func TestParseTarget(t *testing.T) {
	good := []struct {
		in   string
		kind Kind
		name string
		path string
	}{
		{"generic:gs", KindGeneric, "gs", "generic/gs"},
		{"rollout:run-1.v2", KindRollout, "run-1.v2", "rollout/run-1.v2"},
		{"datagen:_x", KindDatagen, "_x", "datagen/_x"},
	}
	for _, g := range good {
		tg, err := ParseTarget(g.in)
		if err != nil {
			t.Fatalf("ParseTarget(%q): %v", g.in, err)
		}
		if tg.Kind != g.kind || tg.Name != g.name {
			t.Errorf("ParseTarget(%q) = %+v", g.in, tg)
		}
		if tg.String() != g.in {
			t.Errorf("String() = %q, want %q", tg.String(), g.in)
		}
		if tg.Path() != g.path {
			t.Errorf("Path() = %q, want %q", tg.Path(), g.path)
		}
		if err := tg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", tg, err)
		}
	}
	bad := []struct{ in, want string }{
		{"generic:../x", "store name"},
		{"generic:a/b", "store name"},
		{"generic:..", "store name"},
		{"generic:a/../b", "store name"},
		{"generic:/etc", "store name"},
		{"rollout:_registry", "reserved"},
		{"rollout:_stats", "reserved"},
		{":x", "unknown kind"},
		{"generic:", "empty"},
		{"bogus:x", "unknown kind"},
		{"generic", "want <kind>:<name>"},
		{"", "want <kind>:<name>"},
		{"generic:a:b", "':'"},
		{"Generic:gs", "unknown kind"},
		{" generic:gs", "unknown kind"},
		{"generic:gs ", "' '"},
		{"generic:gs\n", `'\n'`},
		{"generic/gs", "want <kind>:<name>"},
		{"generic:" + strings.Repeat("x", 129), "129 bytes"},
	}
	for _, b := range bad {
		_, err := ParseTarget(b.in)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParseTarget(%q) = %v, want ErrInvalidInput", b.in, err)
			continue
		}
		if !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParseTarget(%q) = %q, want it to mention %s", b.in, err, b.want)
		}
	}
	if err := (Target{Kind: "bogus", Name: "x"}).Validate(); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Validate(bogus:x) = %v", err)
	}
	if err := (Target{Kind: KindGeneric, Name: "../x"}).Validate(); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Validate(generic:../x) = %v", err)
	}
}

// UnmarshalText parses "<kind>:<name>" strictly (ParseTarget); "" decodes to the zero Target.
// No product code decodes a Target from JSON, so only TestTargetJSON's round trip needs it.
func (t *Target) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*t = Target{}
		return nil
	}
	p, err := ParseTarget(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

func TestTargetJSON(t *testing.T) {
	type doc struct {
		Target Target `json:"target"`
	}
	b, err := json.Marshal(doc{Target: Target{Kind: KindGeneric, Name: "gs"}})
	if err != nil || string(b) != `{"target":"generic:gs"}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil || d.Target != (Target{Kind: KindGeneric, Name: "gs"}) {
		t.Fatalf("Unmarshal = %+v, %v", d, err)
	}
	b, _ = json.Marshal(doc{})
	if string(b) != `{"target":""}` {
		t.Errorf("zero Target marshals as %s", b)
	}
	d = doc{Target: Target{Kind: KindRollout, Name: "x"}}
	if err := json.Unmarshal(b, &d); err != nil || d.Target != (Target{}) {
		t.Errorf("Unmarshal(\"\") = %+v, %v", d, err)
	}
	if err := json.Unmarshal([]byte(`{"target":"generic:../x"}`), &d); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("Unmarshal(traversal) = %v, want ErrInvalidInput", err)
	}
}

func TestShardID(t *testing.T) {
	if got := ShardID(""); got != "default" {
		t.Errorf(`ShardID("") = %q`, got)
	}
	a1, a2, b := ShardID("worker-a"), ShardID("worker-a"), ShardID("worker-b")
	if a1 != a2 {
		t.Errorf("ShardID not stable: %q vs %q", a1, a2)
	}
	if a1 == b {
		t.Errorf("ShardID(worker-a) == ShardID(worker-b) = %q", a1)
	}
	if want := uuid.NewSHA1(uuid.NameSpaceOID, []byte("worker-a")).String(); a1 != want {
		t.Errorf("ShardID(worker-a) = %q, want %q", a1, want)
	}
	// Pinned: the shard id is part of the storage layout, so it must never change.
	if got, want := ShardID("worker-a"), "1e7d3248-a7b1-51ed-be83-24ee16fca099"; got != want {
		t.Errorf("ShardID(worker-a) = %q, pinned %q", got, want)
	}
	if u, err := uuid.Parse(a1); err != nil || u.Version() != 5 {
		t.Errorf("ShardID is not a version-5 UUID: %q (%v)", a1, err)
	}
	if ShardID("default") == "default" {
		t.Error(`ShardID("default") collides with the empty instance's shard`)
	}
}

// FuzzParseTarget: never panics; a parsed target is valid, round-trips through String, and
// its Path is two safe path segments.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"generic:gs", "rollout:a.b-c_d", "datagen:_x", "generic:../x", "generic:a/b",
		"generic:..", "rollout:_registry", ":x", "generic:", "bogus:x", "generic:a:b", "", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("ParseTarget(%q) error %v does not wrap ErrInvalidInput", s, err)
			}
			return
		}
		if tg.String() != s {
			t.Fatalf("ParseTarget(%q).String() = %q", s, tg.String())
		}
		again, err := ParseTarget(tg.String())
		if err != nil || again != tg {
			t.Fatalf("round trip of %q: %+v, %v", s, again, err)
		}
		if err := tg.Validate(); err != nil {
			t.Fatalf("parsed target %+v does not validate: %v", tg, err)
		}
		parts := strings.Split(tg.Path(), "/")
		if len(parts) != 2 || parts[0] != string(tg.Kind) || parts[1] != tg.Name {
			t.Fatalf("Path() = %q", tg.Path())
		}
		if tg.Name == "." || strings.Contains(tg.Name, "..") || strings.ContainsAny(tg.Name, "/:\\\x00") {
			t.Fatalf("unsafe name %q accepted", tg.Name)
		}
	})
}

// A name quoted in an error is clipped at a character boundary, so the message stays UTF-8
// however the name's characters fall on the bound.
func TestClipCutsAtACharacterBoundary(t *testing.T) {
	for _, s := range []string{strings.Repeat("é", 70), "x" + strings.Repeat("é", 70), strings.Repeat("a", 64), strings.Repeat("a", 65)} {
		c := Clip(s)
		if !utf8.ValidString(c) || len(c) > 64+len("...") || !strings.HasPrefix(s, strings.TrimSuffix(c, "...")) {
			t.Errorf("Clip(%q) = %q", s, c)
		}
	}
	if err := ValidateName(strings.Repeat("é", 70)); err == nil || !utf8.ValidString(err.Error()) {
		t.Errorf("ValidateName of 70 é: %v", err)
	}
}
