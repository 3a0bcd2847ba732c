// Command dockerize renders configuration templates the way the Temporal server and UI images'
// dockerize does (`dockerize -template SRC:DST`), for the CI stand-in images that
// scripts/compose-ci.sh builds: the Go module proxy does not serve dockerize, and the
// upstream entrypoints must render the upstream templates unchanged.
//
// The template sees .Env (the environment as map[string]string, so a missing variable is
// nil to a function and false to `if`) and dockerize's functions that those templates call
// (default, split, trim, lower, upper, contains, replace, join, isTrue); a template calling
// any other function fails to parse, so a gap is loud, never a silently different file.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/template"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dockerize:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var pairs []string // SRC:DST
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-template" || a == "--template":
			if i+1 == len(args) {
				return errors.New("-template needs SRC:DST")
			}
			i++
			pairs = append(pairs, args[i])
		case strings.HasPrefix(a, "-template=") || strings.HasPrefix(a, "--template="):
			pairs = append(pairs, a[strings.Index(a, "=")+1:])
		default:
			return fmt.Errorf("unsupported argument %q (only -template SRC:DST)", a)
		}
	}
	if len(pairs) == 0 {
		return errors.New("usage: dockerize -template SRC:DST [-template SRC:DST ...]")
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for _, p := range pairs {
		src, dst, ok := strings.Cut(p, ":")
		if !ok || src == "" || dst == "" {
			return fmt.Errorf("-template %q: want SRC:DST", p)
		}
		if err := render(src, dst, env); err != nil {
			return err
		}
	}
	return nil
}

func render(src, dst string, env map[string]string) error {
	text, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tpl, err := template.New(src).Funcs(funcs).Parse(string(text))
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, struct{ Env map[string]string }{env}); err != nil {
		return err
	}
	return os.WriteFile(dst, out.Bytes(), 0o644)
}

var funcs = template.FuncMap{
	"default":  defaultValue,
	"split":    strings.Split,
	"trim":     strings.TrimSpace,
	"lower":    strings.ToLower,
	"upper":    strings.ToUpper,
	"contains": func(m map[string]string, key string) bool { _, ok := m[key]; return ok },
	"replace":  strings.Replace,
	"join":     strings.Join,
	"isTrue": func(s string) bool {
		b, err := strconv.ParseBool(s)
		return err == nil && b
	},
}

// defaultValue is dockerize's: the first argument unless it is nil (an unset variable; a
// variable set to "" stays ""), else the second, which must be a string.
func defaultValue(args ...any) (string, error) {
	if len(args) == 0 {
		return "", errors.New("default called with no values")
	}
	if args[0] != nil {
		s, ok := args[0].(string)
		if !ok {
			return "", fmt.Errorf("default: %v is not a string", args[0])
		}
		return s, nil
	}
	if len(args) < 2 {
		return "", errors.New("default called with no default value")
	}
	s, ok := args[1].(string)
	if !ok {
		return "", errors.New("default: the default value is not a string")
	}
	return s, nil
}
