package promtext

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValueMatchesLabelsExactlyAndSumAddsEverySeries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# TYPE starts_total counter
starts_total{trigger="http2",result="started"} 5
starts_total{trigger="http",result="started"} 2
starts_total{trigger="http",result="failed"} 1
# TYPE reserved_bytes gauge
reserved_bytes 7
`)
	}))
	defer srv.Close()
	fams, err := Scrape(context.Background(), srv.URL)
	require.NoError(t, err)

	v, ok := Value(fams["starts_total"], "result", "started", "trigger", "http")
	require.True(t, ok)
	require.Equal(t, 2.0, v, "a label value that only starts with the wanted one is another series")
	_, ok = Value(fams["starts_total"], "trigger", "count")
	require.False(t, ok)
	v, ok = Value(fams["reserved_bytes"])
	require.True(t, ok)
	require.Equal(t, 7.0, v)
	require.Equal(t, 8.0, Sum(fams["starts_total"]))
	require.Zero(t, Sum(fams["absent"]))
	require.Panics(t, func() { Value(fams["starts_total"], "trigger") })
}

func TestScrapeFailsOnAnErrorAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := Scrape(context.Background(), srv.URL)
	require.ErrorContains(t, err, "404")
}
