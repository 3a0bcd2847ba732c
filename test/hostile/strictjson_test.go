package hostile

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// JSON member names match exactly: a member that differs from a known one only in case
// ("FIELDS", "NULLABLE", "MAX_PASSES"), a member given twice, or an unknown member is 400
// invalid_input on every body, whichever of the two spellings a decoder would have kept.
// Nothing is created, appended or started.
func TestStrictJSONMembers(t *testing.T) {
	w := startWorker(t, defaultConfig())
	c := w.temporalClient(t)

	w.createGeneric(t, "strict", []field{idField, {Name: "n", Type: "int64", Nullable: true}}, nil)
	w.mustOK(t, http.MethodPost, rowsPath("strict"), []byte(`[{"id":"a","n":1}]`))
	before := w.listing(t)

	const id, n = `{"name":"id","type":"string"}`, `{"name":"n","type":"int64","nullable":true}`
	creates := map[string]string{
		"fields and FIELDS":           `{"fields":[` + id + `],"FIELDS":[` + id + `,` + n + `]}`,
		"Fields alone":                `{"Fields":[` + id + `]}`,
		"nullable and NULLABLE":       `{"fields":[` + id + `,{"name":"n","type":"int64","nullable":false,"NULLABLE":true}]}`,
		"Type in a field":             `{"fields":[` + id + `,{"name":"n","Type":"int64"}]}`,
		"SEAL_ON_APPEND":              `{"fields":[` + id + `],"SEAL_ON_APPEND":true}`,
		"fields twice":                `{"fields":[` + id + `],"fields":[` + id + `,` + n + `]}`,
		"type twice in a field":       `{"fields":[` + id + `,{"name":"n","type":"int64","type":"string"}]}`,
		"unknown member":              `{"fields":[` + id + `],"colour":"red"}`,
		"unknown member in a field":   `{"fields":[` + id + `,{"name":"n","type":"int64","default":1}]}`,
		"seal_on_append and its case": `{"fields":[` + id + `],"seal_on_append":false,"Seal_On_Append":true}`,
	}
	i := 0
	for what, body := range creates {
		i++
		name := "s" + string(rune('a'+i))
		r := w.call(t, http.MethodPost, "/api/v1/stores/generic/"+name, []byte(body), nil)
		expectError(t, r, http.StatusBadRequest, "invalid_input", "create with "+what)
		if r := w.call(t, http.MethodGet, "/api/v1/stores/generic/"+name+"/stats", nil, nil); r.Status != http.StatusNotFound {
			t.Errorf("create with %s: the store exists afterwards (stats: %s)", what, r)
		}
	}

	rows := map[string]string{
		"id and ID": `[{"id":"b","ID":"c"}]`,
		"n and N":   `[{"id":"b","n":1,"N":2}]`,
		"N alone":   `[{"id":"b","N":2}]`,
		"n twice":   `[{"id":"b","n":1,"n":2}]`,
	}
	for what, body := range rows {
		r := w.call(t, http.MethodPost, rowsPath("strict"), []byte(body), nil)
		expectError(t, r, http.StatusBadRequest, "invalid_input", "append with "+what)
	}

	knobs := map[string]string{
		"max_passes and MAX_PASSES": `{"max_passes":1,"MAX_PASSES":2}`,
		"Max_Generations":           `{"Max_Generations":3}`,
		"max_bytes twice":           `{"max_bytes":1,"max_bytes":2}`,
		"unknown knob":              `{"max_passes":1,"passes":2}`,
		"Parallel_Prepare":          `{"Parallel_Prepare":true}`,
	}
	for what, body := range knobs {
		r := w.call(t, http.MethodPost, "/api/v1/stores/generic/strict/merge-wal", []byte(body), nil)
		expectError(t, r, http.StatusBadRequest, "invalid_input", "merge-wal with "+what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mergeID := contract.MergeWalID(target.Target{Kind: target.KindGeneric, Name: "strict"})
	var nf *serviceerror.NotFound
	if _, err := c.DescribeWorkflowExecution(ctx, mergeID, ""); !errors.As(err, &nf) {
		t.Errorf("a refused merge-wal body started %s (describe: %v)", mergeID, err)
	}
	w.checkNothingWritten(t, before, "the refused bodies")
}
