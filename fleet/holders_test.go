package fleet

import "testing"

// TestReportHolders: the holders line groups the shops by member, sorted,
// the free shops last; an empty report says nothing.
func TestReportHolders(t *testing.T) {
	rep := Report{Shops: []ShopReport{
		{ID: "c", Holder: "m2"}, {ID: "d"}, {ID: "b", Holder: "m1"}, {ID: "a", Holder: "m2"}, {ID: "e", State: StateFree},
	}}
	if got, want := rep.Holders(), "m1 runs b; m2 runs a, c; free: d, e"; got != want {
		t.Errorf("Holders:\n got %q\nwant %q", got, want)
	}
	if got := (Report{}).Holders(); got != "" {
		t.Errorf("Holders of an empty report: %q", got)
	}
}
