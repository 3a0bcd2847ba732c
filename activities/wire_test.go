package activities

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// TestPreparedMergeRoundTripsThroughTheWire: a store.PreparedMerge with every field set,
// nested ones included, survives store -> contract -> store unchanged. The value is filled
// by reflection, so a field store adds later is set here too and the test fails until
// wire.go carries it.
func TestPreparedMergeRoundTripsThroughTheWire(t *testing.T) {
	var orig store.PreparedMerge
	fillAll(t, reflect.ValueOf(&orig).Elem(), "PreparedMerge")

	w := preparedToWire(&orig)
	back := preparedFromWire(w)
	require.Equal(t, orig, *back, "store -> contract -> store lost data")

	// Through JSON too: the history carries the wire form's encoding.
	raw, err := json.Marshal(w)
	require.NoError(t, err)
	var decoded contract.PreparedMerge
	require.NoError(t, json.Unmarshal(raw, &decoded))
	require.Equal(t, orig, *preparedFromWire(&decoded), "store -> JSON history -> store lost data")

	// The store's own encoding and the wire encoding agree today; they may drift apart
	// later (the store's tags are its own), the converter absorbs that.
	storeRaw, err := json.Marshal(orig)
	require.NoError(t, err)
	require.JSONEq(t, string(storeRaw), string(raw))

	require.Nil(t, preparedToWire(nil))
	empty := preparedFromWire(&contract.PreparedMerge{})
	require.Equal(t, store.PreparedMerge{}, *empty, "nil slices stay nil")
}

// fillAll sets every field of v (recursively) to a non-zero value and fails on a kind it
// has no rule for, so a new field of a new kind cannot slip through unset.
func fillAll(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	n := 0
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		n++
		switch v.Kind() {
		case reflect.String:
			v.SetString(path)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(int64(n))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(uint64(n))
		case reflect.Float32, reflect.Float64:
			v.SetFloat(float64(n) + 0.5)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), path)
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			fill(v.Index(0), path+"[0]")
			fill(v.Index(1), path+"[1]")
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
			k := reflect.New(v.Type().Key()).Elem()
			e := reflect.New(v.Type().Elem()).Elem()
			fill(k, path+".key")
			fill(e, path+".value")
			v.SetMapIndex(k, e)
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				if !f.IsExported() {
					t.Fatalf("%s.%s is unexported: the wire cannot carry it", path, f.Name)
				}
				fill(v.Field(i), path+"."+f.Name)
			}
		default:
			t.Fatalf("fillAll: no rule for %s (%s); teach the test and wire.go", path, v.Type())
		}
	}
	fill(v, path)
}
