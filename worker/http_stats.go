package worker

import (
	"net/http"

	"github.com/walkeeper/walkeeper/store"
)

// GET .../stats answers the base table, the debt totals of every shard and one page of shards
// in shard id order (docs/API.md): a store's shards grow with its writers, and a page keeps
// the answer bounded however many there are.

const (
	defaultStatsLimit = 100
	maxStatsLimit     = store.MaxStatsShards
)

func (a *apiServer) stats(r *http.Request, s *store.Store) (any, error) {
	after, limit, err := statsQuery(r)
	if err != nil {
		return nil, err
	}
	return s.StatsPage(r.Context(), after, limit)
}

// statsQuery parses ?limit=&after=; after is the next of the previous page, a shard id.
func statsQuery(r *http.Request) (after string, limit int, err error) {
	q := r.URL.Query()
	if limit, err = queryLimit(q, defaultStatsLimit, maxStatsLimit); err != nil {
		return "", 0, err
	}
	after = q.Get("after")
	if after != "" && !store.IsShardID(after) {
		return "", 0, newAPIError(http.StatusBadRequest, CodeInvalidInput, "after %q is not a shard id (the next of a stats page)", clipText(after))
	}
	return after, limit, nil
}
