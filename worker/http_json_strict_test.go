package worker

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// Every request body matches member names exactly: a member that differs from a known one
// only in case, an unknown one and a repeated one are 400 invalid_input naming the member, on
// store creation (top level and schema fields) and on merge-wal; nothing is created or
// started.
func TestHTTPBodiesMatchMemberNamesExactly(t *testing.T) {
	_, c, rs := serveAPI(t, testConfig(t))
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	const id = `{"name":"id","type":"string"}`
	for _, tc := range []struct {
		name, path, body, member string
	}{
		{"fields twice, once upper case", "/api/v1/stores/generic/x", `{"fields":[` + id + `],"FIELDS":[]}`, "FIELDS"},
		{"fields in title case", "/api/v1/stores/generic/x", `{"Fields":[` + id + `]}`, "Fields"},
		{"seal_on_append in upper case", "/api/v1/stores/rollout/x", `{"SEAL_ON_APPEND":true}`, "SEAL_ON_APPEND"},
		{"nullable twice, once upper case", "/api/v1/stores/generic/x",
			`{"fields":[` + id + `,{"name":"n","type":"int64","nullable":false,"NULLABLE":true}]}`, "NULLABLE"},
		{"a field's name in upper case", "/api/v1/stores/generic/x", `{"fields":[{"NAME":"id","type":"string"}]}`, "NAME"},
		{"unknown member of a field", "/api/v1/stores/generic/x", `{"fields":[{"name":"id","type":"string","default":""}]}`, "default"},
		{"repeated member of a field", "/api/v1/stores/generic/x", `{"fields":[{"name":"id","type":"string","type":"int64"}]}`, "type"},
		{"merge knob in upper case", "/api/v1/stores/generic/gs/merge-wal", `{"MAX_BYTES":1}`, "MAX_BYTES"},
		{"merge knob twice", "/api/v1/stores/generic/gs/merge-wal", `{"max_passes":1,"max_passes":2}`, "max_passes"},
		{"merge knob case-folded twice", "/api/v1/stores/generic/gs/merge-wal", `{"parallel_prepare":false,"Parallel_Prepare":true}`, "Parallel_Prepare"},
		{"unknown merge knob", "/api/v1/stores/generic/gs/merge-wal", `{"max_passes":1,"bogus":2}`, "bogus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := expect(t, c.postJSON(tc.path, tc.body), http.StatusBadRequest, CodeInvalidInput)
			if msg := m["error"].(string); !strings.Contains(msg, `"`+tc.member+`"`) {
				t.Fatalf("message does not name member %q: %s", tc.member, msg)
			}
		})
	}
	expect(t, c.get("/api/v1/stores/generic/x/stats"), http.StatusNotFound, CodeStoreNotFound)
	expect(t, c.get("/api/v1/stores/rollout/x/stats"), http.StatusNotFound, CodeStoreNotFound)
	if rs.count() != 0 {
		t.Fatalf("refused merge-wal bodies started %d workflows", rs.count())
	}
	// Exact names still work, in any order, and so do escaped spellings of them.
	expect(t, c.postJSON("/api/v1/stores/generic/y", `{"seal_on_append":false,"fields":[{"type":"string","name":"id"}]}`), http.StatusCreated, "")
	expect(t, c.postJSON("/api/v1/stores/generic/gs/merge-wal", `{"max_p\u0061sses":3,"parallel_prepare":true}`), http.StatusAccepted, "")
	if rs.count() != 1 || rs.calls[0].in.MaxPasses != 3 || !rs.calls[0].in.ParallelPrepare {
		t.Fatalf("merge-wal knobs = %+v", rs.calls)
	}
}

func TestCheckMembersFollowsTheType(t *testing.T) {
	type inner struct {
		A int `json:"a"`
	}
	type embedded struct {
		E int `json:"e"`
	}
	type outer struct {
		embedded
		In      inner            `json:"in"`
		List    []inner          `json:"list"`
		ByName  map[string]inner `json:"by_name"`
		Raw     json.RawMessage  `json:"raw"`
		Any     any              `json:"any"`
		Skipped int              `json:"-"`
		Plain   int
	}
	typ := reflect.TypeFor[*outer]()
	for body, want := range map[string]string{
		`{"e":1,"in":{"a":1},"list":[{"a":1},{"a":2}],"by_name":{"x":{"a":1},"Y":{"a":2}},"Plain":1}`: "",
		`{"raw":{"x":1,"X":2},"any":{"k":1,"K":2}}`:                                                   "",
		`{"in":{"A":1}}`:                  `"A"`,
		`{"list":[{"a":1},{"b":1}]}`:      `"b"`,
		`{"by_name":{"x":{"a":1,"a":2}}}`: `"a"`,
		`{"raw":{"x":1,"x":2}}`:           `"x"`,
		`{"Skipped":1}`:                   `"Skipped"`,
		`{"plain":1}`:                     `"plain"`,
		`{"E":1}`:                         `"E"`,
	} {
		err := checkMembers([]byte(body), typ)
		switch {
		case want == "" && err != nil:
			t.Errorf("checkMembers(%s) = %v, want nil", body, err)
		case want != "" && (err == nil || classify(err).Code != CodeInvalidInput || !strings.Contains(err.Error(), want)):
			t.Errorf("checkMembers(%s) = %v, want invalid_input naming %s", body, err, want)
		}
	}
}

// Without a type, checkMembers refuses a repeated member at any depth and malformed JSON.
func TestCheckMembersWithoutAType(t *testing.T) {
	for body, want := range map[string]string{
		`{"a":1,"b":{"a":2}}`:          "",
		`[{"a":1},{"a":2}]`:            "",
		`{"a":[{"x":1,"y":[1,{}]}]}`:   "",
		`{"a":1,"a":2}`:                CodeInvalidInput,
		`{"a":{"x":1,"x":1}}`:          CodeInvalidInput,
		`[{"a":[],"b":{},"a":null}]`:   CodeInvalidInput,
		`{"a":1`:                       CodeInvalidJSON,
		`{"fields":[],"seal":true} []`: CodeInvalidJSON,
	} {
		if err := checkMembers([]byte(body), nil); (err == nil) != (want == "") || err != nil && classify(err).Code != want {
			t.Errorf("checkMembers(%s, nil) = %v, want %q", body, err, want)
		}
	}
}

// The member check recurses once per nesting level of the body. json.Valid refuses JSON nested
// deeper than encoding/json's limit (10,000) before the walk starts, so a hostile body
// neither grows the stack without bound nor gets past the check. Both cases are sent here:
// the deepest nesting json.Valid accepts is walked (a duplicate member at the bottom is
// still found), and one level more is invalid_json.
func TestCheckMembersDeepNesting(t *testing.T) {
	nested := func(depth int, leaf string) []byte {
		return []byte(`{"any":` + strings.Repeat(`[`, depth-2) + leaf + strings.Repeat(`]`, depth-2) + `}`)
	}
	typ := reflect.TypeFor[*struct {
		Any any `json:"any"`
	}]()
	const limit = 10000 // encoding/json's maximum nesting depth
	err := checkMembers(nested(limit, `{"k":1,"k":2}`), typ)
	if err == nil || classify(err).Code != CodeInvalidInput || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("a repeated member %d levels deep: %v, want invalid_input naming \"k\"", limit, err)
	}
	err = checkMembers(nested(limit+1, `{"k":1}`), typ)
	if err == nil || classify(err).Code != CodeInvalidJSON {
		t.Fatalf("JSON nested %d levels deep: %v, want invalid_json", limit+1, err)
	}
}
