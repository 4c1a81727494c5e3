package fleet

import (
	"hash/fnv"
	"slices"
	"time"
)

// View is what one member knows when it decides which shops to take and
// which to give up: the registry, the live members with the shops each
// said it holds, who holds each shop's lease, and what runs here.
type View struct {
	Self    string
	Shops   []string       // the registry's shop ids
	Members map[string]int // live members (Self included) -> shops held, as last announced
	// Holder is the instance holding each shop's lease; a shop absent or
	// "" is free.
	Holder map[string]string
	// FreeFor is how long each free shop has been seen free.
	FreeFor map[string]time.Duration
	// Running are the shops whose pipeline runs here (starting, standing
	// by or active); Stopping counts the pipelines being stopped.
	Running  map[string]bool
	Stopping int
	// Cooldown are shops this member gave up a moment ago: not taken
	// back before another member had its chance.
	Cooldown map[string]bool
	// Starting are free shops another member announced it is starting
	// (shop -> member; Member.Starting, for less than OrphanGrace): not
	// contended for, the member that started them gets their lease
	// (without it, members that filled their share dropped out of the
	// others' "members with room" and the others raced them for the
	// shops they were still starting).
	Starting map[string]string
	// Can are the shops each other member can run (its registry in
	// force, as it announced); a member absent here (an earlier version)
	// may run every shop. A member gives a shop up only to a member that
	// can run it: registries that differ never leave a shop without a
	// holder.
	Can map[string]map[string]bool
	// Shares are the fair shares other members announced, as each counts
	// it (their registries may differ from this one); absent: this
	// member's.
	Shares map[string]int
	// Slack is how many shops above its fair share a member keeps before
	// it gives one up.
	Slack int
	// OrphanGrace: a shop free this long is taken by any member with
	// room, not only by the one it prefers; free twice as long, by any
	// member (liveness before balance: the extra one is given up later).
	OrphanGrace time.Duration
}

// Plan is a member's decision: the pipelines to start (contend for the
// lease) and to stop (release), and the fair share it is based on.
type Plan struct {
	Share int
	Start []string
	Stop  []string
}

// Share is the fair share of shops per member: ceil(shops/members).
func Share(shops, members int) int {
	if members < 1 {
		members = 1
	}
	return (shops + members - 1) / members
}

// Decide is the pure decision of one round of a member:
//
//   - a pipeline running here whose lease another member holds is
//     stopped (it lost the race for a free shop; a fleet keeps no warm
//     standby of a shop);
//   - a member above share+Slack gives up one shop at a time (the one
//     it prefers least among those it may give up), and only a shop that
//     a member below its own share can run (someone takes it): a shop
//     only this member can run stays here;
//   - a member below its share contends for free shops: at once for a
//     shop that prefers it among the members with room that can run it
//     (rendezvous hashing: few contend for the same shop), after
//     OrphanGrace for any free shop, and after twice OrphanGrace even
//     above its share; a free shop no other member can run at once.
func Decide(v View) Plan {
	members := len(v.Members)
	if _, ok := v.Members[v.Self]; !ok {
		members++
	}
	p := Plan{Share: Share(len(v.Shops), members)}
	held := 0
	var mine []string
	for _, id := range v.Shops {
		if !v.Running[id] {
			continue
		}
		if h := v.Holder[id]; h != "" && h != v.Self {
			p.Stop = append(p.Stop, id)
			continue
		}
		held++
		if v.Holder[id] == v.Self {
			mine = append(mine, id)
		}
	}
	if held > p.Share+v.Slack && v.Stopping == 0 {
		mine = slices.DeleteFunc(mine, func(id string) bool { return !someoneBelow(v, p.Share, id) })
		if len(mine) > 0 {
			slices.SortFunc(mine, func(a, b string) int { return cmpScore(score(a, v.Self), score(b, v.Self)) })
			p.Stop = append(p.Stop, mine[0]) // the one this member prefers least
			return p
		}
	}
	room := p.Share - held
	withRoom := map[string]bool{}
	for m, n := range v.Members {
		if m != v.Self && n < shareOf(v, m, p.Share) {
			withRoom[m] = true
		}
	}
	if room > 0 {
		withRoom[v.Self] = true
	}
	var first, orphans, late []string
	for _, id := range v.Shops {
		if v.Running[id] || v.Holder[id] != "" || v.Cooldown[id] || (v.Starting[id] != "" && v.Starting[id] != v.Self) {
			continue
		}
		switch {
		case !othersCan(v, id):
			late = append(late, id) // no other member can run it: at once
		case room > 0 && preferred(id, able(v, id, withRoom)) == v.Self:
			first = append(first, id)
		case room > 0 && v.FreeFor[id] >= v.OrphanGrace:
			orphans = append(orphans, id)
		case v.FreeFor[id] >= 2*v.OrphanGrace:
			late = append(late, id)
		}
	}
	for _, id := range append(first, orphans...) {
		if room <= 0 {
			break
		}
		p.Start = append(p.Start, id)
		room--
	}
	p.Start = append(p.Start, late...)
	return p
}

// someoneBelow: another member below its own share can run shop id.
func someoneBelow(v View, share int, id string) bool {
	for m, n := range v.Members {
		if m != v.Self && n < shareOf(v, m, share) && canRun(v, m, id) {
			return true
		}
	}
	return false
}

// shareOf is the fair share member m announced, or share.
func shareOf(v View, m string, share int) int {
	if s, ok := v.Shares[m]; ok && s > 0 {
		return s
	}
	return share
}

// canRun says whether member m can run shop id (this member can run every
// shop of its view; a member that did not say may).
func canRun(v View, m, id string) bool {
	can, said := v.Can[m]
	return m == v.Self || !said || can[id]
}

// othersCan: some other live member can run shop id.
func othersCan(v View, id string) bool {
	for m := range v.Members {
		if m != v.Self && canRun(v, m, id) {
			return true
		}
	}
	return false
}

// able are the candidates that can run shop id.
func able(v View, id string, candidates map[string]bool) map[string]bool {
	out := make(map[string]bool, len(candidates))
	for m := range candidates {
		if canRun(v, m, id) {
			out[m] = true
		}
	}
	return out
}

// preferred is the member a shop prefers among the candidates: the
// highest rendezvous hash of (shop, member); ties by name.
func preferred(shop string, candidates map[string]bool) string {
	best, bestScore := "", uint64(0)
	for m := range candidates {
		s := score(shop, m)
		if best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

func score(shop, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(shop))
	h.Write([]byte{0})
	h.Write([]byte(member))
	return h.Sum64()
}

func cmpScore(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
