package shops

import (
	"fmt"
	"slices"
	"strings"
)

// Subjects are where an entry's events go.
type Subjects struct {
	Stream, Prefix string
	// Default: the prefix is the fleet's default for the entry
	// (<prefix>.<id>); defaults never overlap one another (an id has no
	// '.'), so of two overlapping entries the one with a prefix of its
	// own is at fault.
	Default bool
}

// overlap says whether two subject prefixes share subjects: equal, or one
// a token prefix of the other ("orders" and "orders.paris").
func overlap(p, q string) bool {
	return p == q || strings.HasPrefix(q, p+".") || strings.HasPrefix(p, q+".")
}

// refuseOverlaps moves to invalid the entries whose subjects overlap
// another's (a consumer of one shop's subjects would receive the other's
// orders) or lie inside the subjects a stream of the fleet captures while
// they name another stream (the events would be captured twice, or the
// stream refused by the server). Of an overlapping pair, an entry on its
// default prefix is kept; an entry with a prefix of its own is refused,
// naming the others. at are the entries' positions in the file.
func refuseOverlaps(valid []Shop, at []int, invalid []error, opt Options) ([]Shop, []error) {
	subj := make([]Subjects, len(valid))
	for i, s := range valid {
		subj[i] = opt.Subjects(s)
	}
	var kept []Shop
	for i, s := range valid {
		var with []string
		for j, o := range valid {
			if i == j || !overlap(subj[i].Prefix, subj[j].Prefix) || (subj[i].Default && !subj[j].Default) {
				continue
			}
			with = append(with, fmt.Sprintf("shops[%d] (id %q: %s.>)", at[j], o.ID, subj[j].Prefix))
		}
		var streams []string
		for stream, prefix := range opt.Streams {
			if stream != subj[i].Stream && overlap(subj[i].Prefix, prefix) {
				streams = append(streams, fmt.Sprintf("stream %s (%s.>)", stream, prefix))
			}
		}
		slices.Sort(streams)
		if len(with) == 0 && len(streams) == 0 {
			kept = append(kept, s)
			continue
		}
		const most = 3
		if len(with) > most {
			with = append(with[:most], fmt.Sprintf("and %d more", len(with)-most))
		}
		err := fmt.Errorf("subjects %s.> on stream %s overlap those of %s: shops that share subjects mix their orders; give this entry a subjectPrefix of its own",
			subj[i].Prefix, subj[i].Stream, strings.Join(append(streams, with...), ", "))
		invalid = append(invalid, &EntryError{Index: at[i], ID: s.ID, Err: err})
	}
	return kept, invalid
}
