package temporaladmin

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadProbe: one mostly-light round says fair; "off" takes two mostly-heavy rounds; any
// other pair is inconclusive; a round's error is the answer.
func TestReadProbe(t *testing.T) {
	boom := errors.New("poll failed")
	for _, c := range []struct {
		rounds []int
		want   bool
		err    error
		ran    int
	}{
		{rounds: []int{6}, want: true, ran: 1},
		{rounds: []int{1, 5}, want: true, ran: 2},
		{rounds: []int{3, 4}, want: true, ran: 2},
		{rounds: []int{0, 1}, want: false, ran: 2},
		{rounds: []int{1, 3}, err: ErrFairnessInconclusive, ran: 2},
		{rounds: []int{3, 0}, err: ErrFairnessInconclusive, ran: 2},
		{rounds: []int{-1}, err: boom, ran: 1},
	} {
		ran := 0
		got, err := readProbe(func() (int, error) {
			n := c.rounds[ran]
			ran++
			if n < 0 {
				return 0, boom
			}
			return n, nil
		})
		require.ErrorIs(t, err, c.err, "%v", c.rounds)
		if c.err == nil {
			require.NoError(t, err, "%v", c.rounds)
		}
		require.Equal(t, c.want, got, "%v", c.rounds)
		require.Equal(t, c.ran, ran, "rounds run for %v", c.rounds)
	}
}
