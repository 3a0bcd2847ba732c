package bench

import "testing"

func TestParseFleetVariants(t *testing.T) {
	vs, err := parseFleetVariants([]string{"16/256", "32/512", "/128"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"16/256", "32/512", "32/128"}
	if len(vs) != 3 {
		t.Fatalf("variants %v", vs)
	}
	for i, v := range vs {
		if v.String() != want[i] {
			t.Errorf("variant %d = %s, want %s", i, v, want[i])
		}
	}
	if vs[2].isDefault() || vs[2].Concurrency != 0 || vs[2].Batch != 128 {
		t.Errorf("/128 = %+v", vs[2])
	}
	if vs, err := parseFleetVariants(nil); err != nil || len(vs) != 1 || !vs[0].isDefault() {
		t.Errorf("no variants: %v %v, want one default", vs, err)
	}
	for _, bad := range []string{"32", "0/256", "32/513", "x/256", "32/256/planned", "32/256/eager", "32/256/planned/eager"} {
		if _, err := parseFleetVariants([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := parseFleetVariants([]string{"32/256", "32/256"}); err == nil {
		t.Error("a variant listed twice accepted")
	}
}
