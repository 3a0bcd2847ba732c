package worker

import "net/http"

// routeMux is the data plane's http.ServeMux, remembering the patterns registered on it, so
// that docs/API.md can be checked against the real router (worker/api_doc_test.go).
// http.ServeMux itself cannot list its patterns.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle registers h for pattern, as http.ServeMux.Handle does.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.patterns = append(m.patterns, pattern)
}

// HandleFunc registers h for pattern, as http.ServeMux.HandleFunc does.
func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.ServeMux.HandleFunc(pattern, h)
	m.patterns = append(m.patterns, pattern)
}
