package store

// Base runs in a Get, bounded by the read budget whatever the run's size. A Get looks a key up
// in a base run that the cache will not keep in a group of its own (getOnce): the group reads
// the object's bytes into its read arena and opens the run for streaming (list_runs.go), and
// find decodes only the row groups whose key statistics may hold the key, one record batch at
// a time, into buffers of the read reservation, instead of the whole run into one record on
// the Go heap. Runs the cache keeps are decoded whole, once, for every later read.

// find returns the file and row that hold key in source i of g, or nil. A streamed run
// decodes, a batch at a time, only its row groups whose key statistics may hold key.
//
// REQUIRES: g was opened from the start (after ""), and find is called once per source.
func (g *readGroup) find(i int, key string) (*sortedFile, int) {
	if r := g.runs[i]; r != nil {
		r.rb.keyRowGroups(key) // before its first batch is decoded, by r.cursor
		for c := r.cursor(); c.file != nil; r.refill(c) {
			if j := c.file.find(key); j >= 0 {
				return c.file, j
			}
		}
		return nil, -1
	}
	if j := g.files[i].find(key); j >= 0 {
		return g.files[i], j
	}
	return nil, -1
}
