package contract

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// The wire shape of every contract struct is pinned twice:
//
//   - TestWireShape marshals each struct with every field set and compares the JSON with
//     testdata/wire/<Type>.json, so renaming a field's tag, dropping a field or changing its
//     type shows up as a diff in review (go test ./contract -run WireShape -update rewrites
//     the files after a deliberate addition);
//   - TestRecordedHistoriesDecode decodes every payload of the recorded histories in
//     workflows/testdata/replay into its contract type, refusing unknown fields (in a
//     workflow input, whose own decoding ignores them, as UnknownInputFields names them), so
//     a contract change that a running history would no longer decode fails here.

var update = flag.Bool("update", false, "rewrite testdata/wire from the current types")

// wireTypes lists every struct that crosses a Temporal payload; TestWireTypesListed keeps
// it complete.
var wireTypes = []any{
	ListPendingShardsParams{}, ListPendingShardsResult{}, ShardPending{},
	PrepareParams{}, PrepareResult{}, PrepareProgress{},
	AbortParams{}, AbortResult{},
	CommitRoundParams{}, CommitRoundResult{}, RoundShardResult{},
	CompactPassParams{}, CompactPassResult{},
	StartWorkflowsParams{}, StartWorkflowsResult{}, StartRequest{}, StartOutcome{},
	ActivityState{},
	PreparedMerge{}, StagedFile{},
	MergeWalInput{}, MergeWalCarry{}, MergeWalResult{}, ShardMergeResult{}, MergeWalStatus{}, ShardStatus{},
	InFlightActivity{},
	CompactBaseInput{}, CompactBaseResult{}, CompactBaseStatus{},
	MaintenanceSweepInput{}, MaintenanceSweepResult{}, SweepStart{}, SweepSkip{},
	MergeWalTickInput{}, MergeWalTickResult{},
	ScanDemandParams{}, ScanDemandResult{}, ScanDemandProgress{}, DemandTarget{},
	ReconcileCursor{}, ReconcilePageParams{}, ReconcilePageResult{}, ReconcileCounts{}, StoreProblem{},
	ReconcileDemandInput{}, ReconcileDemandResult{}, RecordMaintenanceParams{},
	SweepWindowInput{}, SweepWindowCarry{}, SweepWindowTotals{}, SweepRound{}, SweepWindowResult{}, SweepRoundsMemo{},
}

func TestWireShape(t *testing.T) {
	for _, v := range wireTypes {
		typ := reflect.TypeOf(v)
		t.Run(typ.Name(), func(t *testing.T) {
			got, err := json.MarshalIndent(filled(typ).Interface(), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "wire", typ.Name()+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (new wire type? run go test ./contract -run WireShape -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the JSON shape of %s changed: recorded histories and running workflows depend on it.\n"+
					"Fields may be added (then -update), never renamed or retagged.\ngot:\n%s\nwant:\n%s", typ.Name(), got, want)
			}
		})
	}
}

// TestWireTypesListed: every exported struct type of the package is in wireTypes.
func TestWireTypesListed(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range wireTypes {
		listed[reflect.TypeOf(v).Name()] = true
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, f := range pkgs["contract"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			if _, isStruct := ts.Type.(*ast.StructType); isStruct && !listed[ts.Name.Name] {
				missing = append(missing, ts.Name.Name)
			}
			return true
		})
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("struct types not pinned by TestWireShape (add them to wireTypes): %v", missing)
	}
}

// filled returns a value of typ with every field set to a distinct non-zero value, so that
// omitempty fields show up in the golden JSON too. Values depend on field order and kind
// only, never on Go names: renaming a Go field (keeping its tag) leaves the golden alone.
func filled(typ reflect.Type) reflect.Value {
	n := 0
	var fill func(v reflect.Value, name string)
	fill = func(v reflect.Value, name string) {
		n++
		switch {
		case v.Type() == reflect.TypeFor[time.Duration]():
			v.SetInt(int64(n) * int64(time.Second))
			return
		case v.Type() == reflect.TypeFor[time.Time]():
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, n, 0, time.UTC)))
			return
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString(fmt.Sprintf("s%d", n))
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int32, reflect.Int64:
			v.SetInt(int64(n))
		case reflect.Uint, reflect.Uint32, reflect.Uint64:
			v.SetUint(uint64(n))
		case reflect.Float32, reflect.Float64:
			v.SetFloat(float64(n) + 0.5)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), name)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
			fill(v.Index(0), name)
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() { // an unexported field is not on the wire
					fill(v.Field(i), v.Type().Field(i).Name)
				}
			}
		default:
			panic(fmt.Sprintf("filled: no rule for %s (%s)", name, v.Type()))
		}
	}
	v := reflect.New(typ).Elem()
	fill(v, typ.Name())
	return v
}

// The payload types of each workflow and activity, by registered name: {input, result}.
var (
	workflowPayloads = map[string][2]any{
		MergeWalWorkflow:         {MergeWalInput{}, MergeWalResult{}},
		CompactBaseWorkflow:      {CompactBaseInput{}, CompactBaseResult{}},
		MaintenanceSweepWorkflow: {MaintenanceSweepInput{}, MaintenanceSweepResult{}},
		MergeWalTickWorkflow:     {MergeWalTickInput{}, MergeWalTickResult{}},
		ReconcileDemandWorkflow:  {ReconcileDemandInput{}, ReconcileDemandResult{}},
		SweepWindowWorkflow:      {SweepWindowInput{}, SweepWindowResult{}},
	}
	activityPayloads = map[string][2]any{
		ListPendingShardsActivity: {ListPendingShardsParams{}, ListPendingShardsResult{}},
		PrepareActivity:           {PrepareParams{}, PrepareResult{}},
		CommitRoundActivity:       {CommitRoundParams{}, CommitRoundResult{}},
		AbortActivity:             {AbortParams{}, AbortResult{}},
		CompactBaseActivity:       {CompactPassParams{}, CompactPassResult{}},
		StartWorkflowsActivity:    {StartWorkflowsParams{}, StartWorkflowsResult{}},
		ScanDemandActivity:        {ScanDemandParams{}, ScanDemandResult{}},
		ReconcilePageActivity:     {ReconcilePageParams{}, ReconcilePageResult{}},
		RecordMaintenanceActivity: {RecordMaintenanceParams{}, nil}, // returns only an error
	}
)

// historyEvent is the part of a `temporal workflow show --output json` event this test reads.
type historyEvent struct {
	EventID   string         `json:"eventId"`
	Started   *workflowStart `json:"workflowExecutionStartedEventAttributes"`
	Completed *struct {
		Result payloads `json:"result"`
	} `json:"workflowExecutionCompletedEventAttributes"`
	ContinuedAsNew *workflowStart `json:"workflowExecutionContinuedAsNewEventAttributes"`
	Child          *workflowStart `json:"startChildWorkflowExecutionInitiatedEventAttributes"`
	Scheduled      *struct {
		ActivityType struct{ Name string } `json:"activityType"`
		Input        payloads              `json:"input"`
	} `json:"activityTaskScheduledEventAttributes"`
	ActivityCompleted *struct {
		ScheduledEventID string   `json:"scheduledEventId"`
		Result           payloads `json:"result"`
	} `json:"activityTaskCompletedEventAttributes"`
}

// workflowStart is the workflow and input of a start, a continue-as-new or a child's start.
type workflowStart struct {
	WorkflowType struct{ Name string } `json:"workflowType"`
	Input        payloads              `json:"input"`
}

type payloads struct {
	Payloads []struct {
		Data string `json:"data"`
	} `json:"payloads"`
}

func TestRecordedHistoriesDecode(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "workflows", "testdata", "replay", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no recorded histories found in workflows/testdata/replay")
	}
	decoded := map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var h struct{ Events []historyEvent }
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		check := func(ev historyEvent, what string, p payloads, into any) {
			t.Helper()
			for _, pl := range p.Payloads {
				data, err := base64.StdEncoding.DecodeString(pl.Data)
				if err != nil {
					t.Fatalf("%s event %s: %v", f, ev.EventID, err)
				}
				dec := json.NewDecoder(bytes.NewReader(data))
				dec.DisallowUnknownFields()
				v := reflect.New(reflect.TypeOf(into))
				if err := dec.Decode(v.Interface()); err != nil {
					t.Errorf("%s event %s: %s %s does not decode into contract.%T: %v\n%s",
						filepath.Base(f), ev.EventID, what, "payload", into, err, data)
				}
				// A workflow input decodes itself, past DisallowUnknownFields.
				if names, total := UnknownInputFields(data, v.Interface()); plainDecoded[v.Type().Elem()] && total != 0 {
					t.Errorf("%s event %s: %s names members its workflow ignores: %q", filepath.Base(f), ev.EventID, what, names)
				}
				decoded[reflect.TypeOf(into).Name()]++
			}
		}
		wfType := ""
		scheduled := map[string]string{}
		for _, ev := range h.Events {
			switch {
			case ev.Started != nil:
				wfType = ev.Started.WorkflowType.Name
				check(ev, wfType+" input", ev.Started.Input, payloadType(t, workflowPayloads, wfType, 0))
			case ev.ContinuedAsNew != nil:
				check(ev, "continue-as-new input", ev.ContinuedAsNew.Input, payloadType(t, workflowPayloads, ev.ContinuedAsNew.WorkflowType.Name, 0))
			case ev.Child != nil:
				check(ev, "child input", ev.Child.Input, payloadType(t, workflowPayloads, ev.Child.WorkflowType.Name, 0))
			case ev.Completed != nil:
				check(ev, wfType+" result", ev.Completed.Result, payloadType(t, workflowPayloads, wfType, 1))
			case ev.Scheduled != nil:
				name := ev.Scheduled.ActivityType.Name
				scheduled[ev.EventID] = name
				check(ev, name+" input", ev.Scheduled.Input, payloadType(t, activityPayloads, name, 0))
			case ev.ActivityCompleted != nil:
				name := scheduled[ev.ActivityCompleted.ScheduledEventID]
				check(ev, name+" result", ev.ActivityCompleted.Result, payloadType(t, activityPayloads, name, 1))
			}
		}
	}
	// The histories must exercise the prepared-merge wire type and every workflow input, or
	// this test proves little.
	for _, name := range []string{"PrepareResult", "CommitRoundParams", "MergeWalResult", "ScanDemandResult", "ReconcilePageResult",
		"MergeWalInput", "CompactBaseInput", "MaintenanceSweepInput", "SweepWindowInput", "MergeWalTickInput", "ReconcileDemandInput"} {
		if decoded[name] == 0 {
			t.Errorf("no recorded %s payload decoded; the histories no longer cover it", name)
		}
	}
}

func payloadType(t *testing.T, table map[string][2]any, name string, i int) any {
	t.Helper()
	p, ok := table[name]
	if !ok {
		t.Fatalf("recorded history names %q, which the contract does not know", name)
	}
	return p[i]
}
