package contract

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/target"
)

func TestParseFairnessWeights(t *testing.T) {
	w, err := ParseFairnessWeights(" rollout=2, generic=0.5 ")
	if err != nil {
		t.Fatal(err)
	}
	if w.Weight(target.KindRollout) != 2 || w.Weight(target.KindGeneric) != 0.5 || w.Weight(target.KindDatagen) != DefaultFairnessWeight {
		t.Errorf("weights %v", w)
	}
	if got, want := w.String(), "rollout=2,generic=0.5,datagen=1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if w, err := ParseFairnessWeights(""); err != nil || w.String() != "rollout=1,generic=1,datagen=1" {
		t.Errorf("empty: %v, %v", w, err)
	}
	// A long bad value is quoted clipped: the error stays one short line.
	for _, bad := range []string{"rollout", "rollout=", "rollout=x", "rollout=0", "rollout=-1", "rollout=1e9",
		"rollout=NaN", "rollout=Inf", "nokind=1", "rollout=1,rollout=2", "rollout=1,", "=1",
		strings.Repeat("x", 1<<16), "rollout=" + strings.Repeat("x", 1<<16), strings.Repeat("k", 1<<16) + "=1"} {
		if _, err := ParseFairnessWeights(bad); !errors.Is(err, target.ErrInvalidInput) || len(err.Error()) > 512 {
			t.Errorf("%.20q: err %.80v, want an invalid input of at most 512 bytes", bad, err)
		}
	}
}

func TestMergePriorityLadder(t *testing.T) {
	if got, want := MergePriority(target.KindGeneric, false, 0), (temporal.Priority{PriorityKey: 3, FairnessKey: "generic", FairnessWeight: 1}); got != want {
		t.Errorf("routine: %+v, want %+v", got, want)
	}
	if got, want := MergePriority(target.KindRollout, true, 4), (temporal.Priority{PriorityKey: 2, FairnessKey: "rollout", FairnessWeight: 4}); got != want {
		t.Errorf("urgent: %+v, want %+v", got, want)
	}
	if !(SweepPriority.PriorityKey < PriorityUrgentMerge && PriorityUrgentMerge < PriorityRoutineMerge) {
		t.Error("the ladder must put the sweep first, then urgent merges, then routine ones")
	}
}
