package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderFollowsDockerize: the constructs the Temporal server's and UI's templates use
// render as dockerize renders them: an unset variable takes the default, a variable set to ""
// stays empty, `if` on an unset variable is false, split/range/trim/lower work on values, and
// a function dockerize has but this renderer lacks fails the render instead of dropping text.
func TestRenderFollowsDockerize(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "in.yaml")
	dst := filepath.Join(dir, "out.yaml")
	tpl := `db: {{ default .Env.DB "cassandra" | lower }}
port: {{ default .Env.UNSET_PORT "5432" }}
empty: "{{ default .Env.EMPTY "x" }}"
{{- if .Env.UNSET_ORIGINS }}
origins: set
{{- else }}
origins: default
{{- end }}
{{- range split .Env.LIST "," }}
- {{ trim . }}
{{- end }}
`
	if err := os.WriteFile(src, []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DB", "POSTGRES12")
	t.Setenv("EMPTY", "")
	t.Setenv("LIST", "a, b")
	if err := run([]string{"-template", src + ":" + dst}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	want := "db: postgres12\nport: 5432\nempty: \"\"\norigins: default\n- a\n- b\n"
	if string(got) != want {
		t.Fatalf("rendered\n%s\nwant\n%s", got, want)
	}

	if err := os.WriteFile(src, []byte(`{{ jsonQuery .Env.X "a" }}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-template", src + ":" + dst}); err == nil || !strings.Contains(err.Error(), "jsonQuery") {
		t.Fatalf("a function the renderer lacks: err = %v, want a parse error naming it", err)
	}
	if err := run([]string{"-wait", "tcp://x:1"}); err == nil {
		t.Fatal("an unsupported dockerize flag was accepted")
	}
}
