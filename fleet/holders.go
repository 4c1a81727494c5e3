package fleet

import (
	"maps"
	"slices"
	"strings"
)

// Holders says who runs which shop by the report: "member-1 runs
// shop-001, shop-003; member-2 runs shop-002; free: shop-004" (members
// and shops sorted; the shops no member holds last).
func (r Report) Holders() string {
	by := map[string][]string{}
	var free []string
	for _, s := range r.Shops {
		if s.Holder == "" {
			free = append(free, s.ID)
			continue
		}
		by[s.Holder] = append(by[s.Holder], s.ID)
	}
	var parts []string
	for _, h := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, h+" runs "+strings.Join(slices.Sorted(slices.Values(by[h])), ", "))
	}
	if len(free) > 0 {
		slices.Sort(free)
		parts = append(parts, "free: "+strings.Join(free, ", "))
	}
	return strings.Join(parts, "; ")
}
