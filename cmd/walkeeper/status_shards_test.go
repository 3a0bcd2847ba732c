package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
)

// `walkeeper status TARGET` prints the totals of every shard and one page of shards, says how
// many it left out and the --shards-after of the next page; following it lists each shard
// once. Temporal is unreachable here: the storage part is printed before that error.
func TestStatusTargetPagesShards(t *testing.T) {
	noDev(t)
	ctx := t.Context()
	storage := "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "storage"))
	tg := store.Target{Kind: store.KindGeneric, Name: "gs"}
	schema := store.Schema{Fields: []store.Field{{Name: "id", Type: store.TypeString}}}
	const shards = 5
	for i := range shards {
		opts := store.DefaultOptions()
		opts.InstanceID = fmt.Sprintf("writer-%d", i)
		db, err := store.OpenDB(ctx, storage, opts)
		require.NoError(t, err)
		s, err := db.Create(ctx, tg, store.CreateOptions{Schema: &schema})
		if i > 0 {
			require.ErrorIs(t, err, store.ErrAlreadyExists)
			s, err = db.Open(ctx, tg)
		}
		require.NoError(t, err)
		for g := range i%2 + 1 {
			_, err = s.Append(ctx, []store.Row{{Key: fmt.Sprint(g), Values: []any{fmt.Sprint(g)}}})
			require.NoError(t, err)
			_, err = s.Flush(ctx)
			require.NoError(t, err)
		}
		require.NoError(t, db.Close(ctx))
	}

	shardLine := regexp.MustCompile(`(?m)^  ([0-9a-f-]{36})  +[0-9]+ `)
	moreLine := regexp.MustCompile(`(?m)^  ([0-9]+) shards not listed: run again with --shards-after (\S+) for the next 2$`)
	args := []string{"status", "generic:gs", "--storage", storage, "--temporal", "127.0.0.1:1", "--shards-limit", "2"}
	var seen []string
	for pages := 1; ; pages++ {
		require.LessOrEqual(t, pages, shards, "paging does not end")
		code, out, errOut := runCLI(t, args...)
		require.Equal(t, cli.ExitFailure, code, "Temporal is unreachable: %s", errOut)
		assert.Contains(t, out, "  5 shards, 5 with pending generations: 7 pending (")
		assert.Contains(t, out, ", at most 2 in one shard, the oldest sealed ")
		assert.Regexp(t, `(?m)^  all 5 shards +7 `, out)
		page := shardLine.FindAllStringSubmatch(out, -1)
		require.NotEmpty(t, page, out)
		require.LessOrEqual(t, len(page), 2, out)
		for _, m := range page {
			seen = append(seen, m[1])
		}
		more := moreLine.FindStringSubmatch(out)
		if more == nil {
			require.Equal(t, 3, pages, out)
			require.Contains(t, out, fmt.Sprintf("  %d shards not listed: those up to --shards-after %s\n", shards-len(page), args[len(args)-1]))
			break
		}
		require.Equal(t, fmt.Sprint(shards-len(page)), more[1], out)
		require.Equal(t, page[len(page)-1][1], more[2], "the cursor is the last shard printed")
		args = append(args[:8:8], "--shards-after", more[2])
	}
	require.Len(t, seen, shards)
	for i := 1; i < len(seen); i++ {
		require.Less(t, seen[i-1], seen[i], "each shard once, in shard id order")
	}

	// A bad page flag is a usage error of one line, before anything is read.
	for _, bad := range [][]string{
		{"--shards-limit", "0"}, {"--shards-limit", "1001"}, {"--shards-after", "nope"}, {"--shards-after", seen[0] + "0"},
	} {
		code, _, errOut := runCLI(t, append([]string{"status", "generic:gs", "--storage", storage, "--temporal", "127.0.0.1:1"}, bad...)...)
		assert.Equal(t, cli.ExitUsage, code, "%v: %s", bad, errOut)
		assert.True(t, strings.HasPrefix(errOut, "walkeeper: "+bad[0]+" "), "%v: %s", bad, errOut)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %s", errOut)
	}
	code, _, errOut := runCLI(t, "status", "--storage", storage, "--temporal", "127.0.0.1:1", "--shards-limit", "5")
	assert.Equal(t, cli.ExitUsage, code, errOut)
	assert.Equal(t, "walkeeper: --shards-after and --shards-limit page a store's shards: they need a TARGET (see 'walkeeper status --help')\n", errOut)
}
