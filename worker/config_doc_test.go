package worker

import (
	_ "embed"
	"strings"
	"text/template"
)

// configDoc is the template of docs/CONFIG.md: the prose around the knob table.
//
//go:embed config.md.tmpl
var configDoc string

var configDocTmpl = template.Must(template.New("CONFIG.md").Parse(configDoc))

// configMarkdown renders docs/CONFIG.md from Knobs() and config.md.tmpl.
func configMarkdown() string {
	var b strings.Builder
	if err := configDocTmpl.Execute(&b, Knobs()); err != nil {
		panic("worker: config.md.tmpl: " + err.Error()) // the template is compiled in; TestConfigDocUpToDate runs it
	}
	return b.String()
}
