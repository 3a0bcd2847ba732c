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

// KnobInfo describes one knob for documentation.
type KnobInfo struct {
	Flag    string // command-line flag without dashes
	Env     string // environment variable
	Type    string // string, int, bytes, duration, bool
	Default string // documented default
	Usage   string
}

// Knobs lists every knob in documentation order.
func Knobs() []KnobInfo {
	d := DefaultConfig()
	d.Instance = "host name" // not the name of the machine that renders the docs
	out := make([]KnobInfo, 0, len(knobs))
	for _, k := range knobs {
		out = append(out, KnobInfo{Flag: k.Flag, Env: k.env(), Type: k.Type, Default: k.get(&d), Usage: k.Usage})
	}
	return out
}

// Metrics returns the worker's registry and collectors.
func (w *Worker) Metrics() *Metrics { return w.metrics }
