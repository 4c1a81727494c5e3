package fleet

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func ids(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("s%02d", i))
	}
	return out
}

func TestDecide(t *testing.T) {
	grace := 3 * time.Second
	set := func(xs ...string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	tests := []struct {
		name string
		v    View
		want string // "share start=... stop=..."
	}{
		{"alone: takes every free shop", View{Self: "a", Shops: ids(3), Members: map[string]int{"a": 0}},
			"3 start=s00,s01,s02 stop="},
		{"a shop whose lease another holds is stopped", View{Self: "a", Shops: ids(2), Members: map[string]int{"a": 2, "b": 0},
			Holder: map[string]string{"s00": "b", "s01": "a"}, Running: set("s00", "s01")},
			"1 start= stop=s00"},
		{"above share with someone below: one given up, the least preferred", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 4, "b": 0},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a", "s03": "a"}, Running: set(ids(4)...)},
			"2 start= stop=" + leastPreferred(ids(4), "a")},
		{"above share, one already stopping: none more", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 4, "b": 0},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a", "s03": "a"}, Running: set(ids(4)...), Stopping: 1},
			"2 start= stop="},
		{"above share, nobody below (as announced): kept", View{Self: "a", Shops: ids(5), Members: map[string]int{"a": 4, "b": 3},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a", "s04": "a", "s03": "b"}, Running: set("s00", "s01", "s02", "s04")},
			"3 start= stop="},
		{"within the slack: kept", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 3, "b": 1}, Slack: 1,
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a", "s03": "b"}, Running: set("s00", "s01", "s02")},
			"2 start= stop="},
		{"at share: a fresh orphan left to the others", View{Self: "a", Shops: ids(3), Members: map[string]int{"a": 2, "b": 1},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": ""}, Running: set("s00", "s01"), FreeFor: map[string]time.Duration{"s02": grace}, OrphanGrace: grace},
			"2 start= stop="},
		{"at share: an orphan free twice the grace taken", View{Self: "a", Shops: ids(3), Members: map[string]int{"a": 2, "b": 2},
			Holder: map[string]string{"s00": "a", "s01": "a"}, Running: set("s00", "s01"), FreeFor: map[string]time.Duration{"s02": 2 * grace}, OrphanGrace: grace},
			"2 start=s02 stop="},
		{"a shop given up a moment ago is not taken back", View{Self: "a", Shops: ids(2), Members: map[string]int{"a": 0},
			Cooldown: set("s01")},
			"2 start=s00 stop="},
		{"a shop another member is starting is left to it", View{Self: "a", Shops: ids(2), Members: map[string]int{"a": 0},
			Starting: map[string]string{"s01": "b"}},
			"2 start=s00 stop="},
		{"a shop this member announced as starting is not held back", View{Self: "a", Shops: ids(2), Members: map[string]int{"a": 0},
			Starting: map[string]string{"s01": "a"}},
			"2 start=s00,s01 stop="},
		{"room for one", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 1},
			Holder: map[string]string{"s00": "a"}, Running: set("s00"), FreeFor: map[string]time.Duration{"s01": grace, "s02": grace, "s03": grace}, OrphanGrace: grace},
			"4 start=s01,s02,s03 stop="},
		{"self missing from the members still counts", View{Self: "a", Shops: ids(4), Members: map[string]int{"b": 0}},
			"2 start=" + strings.Join(preferredOf(ids(4), "a", "b"), ",") + " stop="},
		{"above share: only a shop the member below can run is given up", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 4, "b": 0},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a", "s03": "a"}, Running: set(ids(4)...),
			Can: map[string]map[string]bool{"b": set("s00", "s02")}},
			"2 start= stop=" + leastPreferred([]string{"s00", "s02"}, "a")},
		{"above share: a shop no member below can run stays", View{Self: "a", Shops: ids(3), Members: map[string]int{"a": 3, "b": 0},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a"}, Running: set(ids(3)...),
			Can: map[string]map[string]bool{"b": {}}},
			"2 start= stop="},
		{"above share: the member below as it counts itself (its registry is smaller)", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 3, "b": 1},
			Holder: map[string]string{"s00": "a", "s01": "a", "s02": "a", "s03": "b"}, Running: set("s00", "s01", "s02"),
			Shares: map[string]int{"b": 1}},
			"2 start= stop="},
		{"a free shop no other member can run: taken at once, above the share", View{Self: "a", Shops: ids(4), Members: map[string]int{"a": 0, "b": 0},
			Can: map[string]map[string]bool{"b": set("s00")}},
			"2 start=" + strings.Join(append(preferredOf([]string{"s00"}, "a", "b"), "s01", "s02", "s03"), ",") + " stop="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.v)
			got := fmt.Sprintf("%d start=%s stop=%s", p.Share, strings.Join(p.Start, ","), strings.Join(p.Stop, ","))
			if got != tt.want {
				t.Errorf("Decide = %s, want %s", got, tt.want)
			}
		})
	}
}

func leastPreferred(shops []string, self string) string {
	return slices.MinFunc(shops, func(a, b string) int { return cmpScore(score(a, self), score(b, self)) })
}

func preferredOf(shops []string, self string, others ...string) []string {
	c := map[string]bool{self: true}
	for _, o := range others {
		c[o] = true
	}
	var out []string
	for _, s := range shops {
		if preferred(s, c) == self {
			out = append(out, s)
		}
	}
	return out
}

// TestDecideConverges plays rounds of a fleet with Decide alone (a lease
// goes to the first member that asks in a round; a release frees it at
// once): every shop is held, none by two members, and no member holds
// more than its fair share once stable; after a member dies (its shops
// free, it leaves the members) the others take all of its shops and are
// balanced again; a member that joins gets its share.
func TestDecideConverges(t *testing.T) {
	for _, tc := range []struct{ shops, members int }{{20, 3}, {10, 2}, {7, 3}, {1000, 3}, {5, 7}} {
		t.Run(fmt.Sprintf("%d shops on %d members", tc.shops, tc.members), func(t *testing.T) {
			shops := ids(tc.shops)
			holder := map[string]string{}
			free := map[string]int{} // rounds free
			var members []string
			for i := range tc.members {
				members = append(members, fmt.Sprintf("m%d", i))
			}
			round := func() (moved int) {
				counts := map[string]int{}
				for _, m := range members {
					counts[m] = 0
				}
				for _, h := range holder {
					counts[h]++
				}
				for _, m := range members { // one after another, each with the view of the round's start
					v := View{Self: m, Shops: shops, Members: counts, Holder: map[string]string{}, Running: map[string]bool{},
						FreeFor: map[string]time.Duration{}, OrphanGrace: 3 * time.Second}
					for s, h := range holder {
						v.Holder[s] = h
						if h == m {
							v.Running[s] = true
						}
					}
					for _, s := range shops {
						if holder[s] == "" {
							v.FreeFor[s] = time.Duration(free[s]) * time.Second
						}
					}
					p := Decide(v)
					for _, s := range p.Stop {
						delete(holder, s)
						moved++
					}
					for _, s := range p.Start {
						if holder[s] == "" {
							holder[s] = m
							moved++
						}
					}
				}
				for _, s := range shops {
					if holder[s] == "" {
						free[s]++
					} else {
						free[s] = 0
					}
				}
				return moved
			}
			settle := func(what string) {
				t.Helper()
				for i := 0; ; i++ {
					if i > 3*tc.shops+20 {
						t.Fatalf("%s: no stable state after %d rounds", what, i)
					}
					if round() == 0 {
						break
					}
				}
				counts := map[string]int{}
				for _, s := range shops {
					h := holder[s]
					if !slices.Contains(members, h) {
						t.Fatalf("%s: shop %s held by %q", what, s, h)
					}
					counts[h]++
				}
				share := Share(tc.shops, len(members))
				for m, n := range counts {
					if n > share {
						t.Errorf("%s: %s holds %d shops, fair share %d", what, m, n, share)
					}
				}
			}
			settle("start")
			dead := members[0]
			members = members[1:]
			for s, h := range holder {
				if h == dead {
					delete(holder, s)
				}
			}
			if len(members) > 0 {
				settle("after a member died")
			}
			members = append(members, "new")
			settle("after a member joined")
		})
	}
}
