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
//     it prefers least), and only while some member is below its share
//     (someone takes it);
//   - a member below its share contends for free shops: at once for a
//     shop that prefers it among the members with room (rendezvous
//     hashing: few contend for the same shop), after OrphanGrace for any
//     free shop, and after twice OrphanGrace even above its share.
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
	if held > p.Share+v.Slack && v.Stopping == 0 && someoneBelow(v, p.Share) && len(mine) > 0 {
		slices.SortFunc(mine, func(a, b string) int { return cmpScore(score(a, v.Self), score(b, v.Self)) })
		p.Stop = append(p.Stop, mine[0]) // the one this member prefers least
		return p
	}
	room := p.Share - held
	withRoom := map[string]bool{}
	for m, n := range v.Members {
		if n < p.Share {
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
		case room > 0 && preferred(id, withRoom) == v.Self:
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

func someoneBelow(v View, share int) bool {
	for m, n := range v.Members {
		if m != v.Self && n < share {
			return true
		}
	}
	return false
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
