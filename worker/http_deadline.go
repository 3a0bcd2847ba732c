package worker

import (
	"net/http"
	"time"
)

// freshWriteDeadline gives w's connection a new write deadline of --http-write-timeout from
// now, for a handler that waited on purpose (merge-wal?wait=true) longer than the deadline
// the server set when it read the request: the answer must still be written. The server's
// read deadline needs no such care: net/http clears it once the request body is consumed.
func (a *apiServer) freshWriteDeadline(w http.ResponseWriter) {
	if a.cfg.HTTPWriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.cfg.HTTPWriteTimeout)) // unsupported under httptest
	}
}
