package plenty

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var (
	mergeSimSeeds = flag.Int("merge-sim-seeds", 0, "TestSessionsMergeSimulation, TestWaitsMergeSimulation: seeds to run (0: 100; make merge-sim runs many)")
	mergeSimFirst = flag.Uint64("merge-sim-first", 1, "TestSessionsMergeSimulation, TestWaitsMergeSimulation: the first seed")
)

// mergeSeeds runs one seed after the other; a failing one says how to
// replay it.
func mergeSeeds(t *testing.T, name string, run func(seed uint64) error) {
	seeds := *mergeSimSeeds
	if seeds <= 0 {
		seeds = 100
	}
	for seed := *mergeSimFirst; seed < *mergeSimFirst+uint64(seeds); seed++ {
		if err := run(seed); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test -run %s ./plenty -args -merge-sim-first=%d -merge-sim-seeds=1", seed, err, name, seed)
		}
	}
}

// TestSessionsMergeSimulation: seeded random "sessions" records of a
// group (three clients, each with versions of its list as it opened and
// closed sessions, and an earlier version's writer that names none), each
// record its writer's latest list and any version of the others'. Merged,
// every pair keeps exactly the sessions still open that the latest list
// of each client holds (the own record's writer's: its own), and every
// unnamed one; with different writers it is the same either way round,
// and merging the result with an input again changes nothing.
func TestSessionsMergeSimulation(t *testing.T) {
	mergeSeeds(t, "TestSessionsMergeSimulation", sessionsMergeSeed)
}

func sessionsMergeSeed(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x73657373))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	// Every session has its own end, past or still to come, more than
	// copySlack from any other's (two copies of a session no client is
	// named for differ by less: joinEnds), and distinct to the nanosecond.
	n := 0
	used := map[int]bool{}
	session := func() time.Time {
		n++
		k := rng.IntN(4*1200) - 1200
		for used[k] {
			k = rng.IntN(4*1200) - 1200
		}
		used[k] = true
		return now.Add(time.Duration(k)*(copySlack+time.Second) + time.Duration(n))
	}
	clients := []string{"a1", "b2", "c3"}
	versions := map[string][]sessionsOf{}
	for _, c := range clients {
		var open []time.Time
		for v := range 1 + rng.IntN(4) {
			open = slices.DeleteFunc(slices.Clone(open), func(time.Time) bool { return rng.IntN(3) == 0 })
			for range rng.IntN(3) {
				open = append(open, session())
			}
			versions[c] = append(versions[c], sessionsOf{Ends: open, SavedAt: now.Add(time.Duration(v-10) * time.Minute)})
		}
	}
	unnamed := func() (ends []time.Time) {
		for range rng.IntN(3) {
			ends = append(ends, session())
		}
		return ends
	}
	record := func() guardRecord {
		r := guardRecord{Limit: 3, SavedAt: now.Add(-time.Minute)}
		if rng.IntN(5) > 0 {
			r.Owner = clients[rng.IntN(len(clients))]
			latest := versions[r.Owner][len(versions[r.Owner])-1]
			r.UnsureEnds, r.SavedAt = latest.Ends, latest.SavedAt
		} else {
			r.UnsureEnds = unnamed()
		}
		if rng.IntN(4) == 0 {
			r.NotBefore = now.Add(time.Duration(rng.IntN(7200)-600) * time.Second)
		}
		for _, c := range clients {
			if c != r.Owner && rng.IntN(3) > 0 {
				if r.Others == nil {
					r.Others = map[string]sessionsOf{}
				}
				r.Others[c] = versions[c][rng.IntN(len(versions[c]))]
			}
		}
		if rng.IntN(4) == 0 {
			if r.Others == nil {
				r.Others = map[string]sessionsOf{}
			}
			r.Others[unnamedClient] = sessionsOf{Ends: unnamed(), SavedAt: now.Add(-time.Hour)}
		}
		return r
	}
	for pair := range 20 {
		o, g := record(), record()
		ro, _ := json.Marshal(o)
		rg, _ := json.Marshal(g)
		m, err := MergeSessions(ro, rg, now)
		if err != nil {
			return err
		}
		got, want := sessionsLive(m, now), wantSessions(o, g, now)
		if !slices.EqualFunc(got, want, time.Time.Equal) {
			return fmt.Errorf("pair %d: %s merged into %s: %s counts %v, want %v", pair, rg, ro, m, got, want)
		}
		var mr guardRecord
		_ = json.Unmarshal(m, &mr)
		if !mr.NotBefore.Equal(later(o.NotBefore, g.NotBefore)) {
			return fmt.Errorf("pair %d: merged login wait %v, the inputs' %v and %v", pair, mr.NotBefore, o.NotBefore, g.NotBefore)
		}
		if o.Owner != g.Owner || o.Owner == "" {
			back, _ := MergeSessions(rg, ro, now)
			if other := sessionsLive(back, now); !slices.EqualFunc(other, got, time.Time.Equal) {
				return fmt.Errorf("pair %d: %s and %s merge to %v one way, %v the other", pair, ro, rg, got, other)
			}
		}
		again, _ := MergeSessions(m, rg, now)
		if other := sessionsLive(again, now); !slices.EqualFunc(other, got, time.Time.Equal) {
			return fmt.Errorf("pair %d: merged %s, merged again with %s: %v, was %v", pair, m, rg, other, got)
		}
		// The merge read back by another replica (moved by a few
		// milliseconds) and merged into it: every session counted once.
		shifted, _ := ShiftSessions(m, time.Duration(1+rng.IntN(50))*time.Millisecond)
		back, _ := MergeSessions(m, shifted, now)
		if other := sessionsLive(back, now); len(other) != len(got) {
			return fmt.Errorf("pair %d: merged %s, merged with its copy moved by milliseconds: %v, was %v", pair, m, other, got)
		}
	}
	return nil
}

// sessionsLive is every end after now a record counts, sorted.
func sessionsLive(raw json.RawMessage, now time.Time) []time.Time {
	var r guardRecord
	_ = json.Unmarshal(raw, &r)
	ends := slices.Clone(r.UnsureEnds)
	for _, s := range r.Others {
		ends = append(ends, s.Ends...)
	}
	return liveSorted(ends, now)
}

func liveSorted(ends []time.Time, now time.Time) []time.Time {
	var out []time.Time
	for _, e := range ends {
		if e.After(now) && !slices.ContainsFunc(out, e.Equal) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// wantSessions is what a merge of o (own) and g must count: o's writer's
// own list, every other client's latest list of the two records', and
// every session no client is named for.
func wantSessions(o, g guardRecord, now time.Time) []time.Time {
	var ends []time.Time
	latest := map[string]sessionsOf{}
	for _, r := range []guardRecord{o, g} {
		for k, s := range r.Others {
			if k == unnamedClient {
				ends = append(ends, s.Ends...)
			} else if cur, ok := latest[k]; !ok || s.SavedAt.After(cur.SavedAt) {
				latest[k] = s
			}
		}
		switch {
		case r.Owner == "":
			ends = append(ends, r.UnsureEnds...)
		case r.Owner == o.Owner:
			latest[r.Owner] = sessionsOf{Ends: o.UnsureEnds, SavedAt: now.Add(time.Hour)}
		default:
			if cur, ok := latest[r.Owner]; !ok || r.SavedAt.After(cur.SavedAt) {
				latest[r.Owner] = sessionsOf{Ends: r.UnsureEnds, SavedAt: r.SavedAt}
			}
		}
	}
	for _, s := range latest {
		ends = append(ends, s.Ends...)
	}
	return liveSorted(ends, now)
}

// TestWaitsMergeSimulation: seeded random "waits" records, each some of
// the copies of a few answers (a copy: moved onto another replica's clock
// by a few milliseconds either way; some answers bounded by their
// period's reset), some ended. Merged, every pair binds, at now and at
// every time after, at least as long as each wait of either with time
// left (one of the merged waits binds as long); it holds only waits of
// the inputs, the same ones either way round, and merging it with an
// input again changes nothing.
func TestWaitsMergeSimulation(t *testing.T) {
	mergeSeeds(t, "TestWaitsMergeSimulation", waitsMergeSeed)
}

func waitsMergeSeed(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x77616974))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var answers []Wait
	for i := range 1 + rng.IntN(3) {
		d := time.Duration(1+rng.IntN(7200)) * time.Second
		at := now.Add(-time.Duration(rng.IntN(3600)) * time.Second)
		w := Wait{Until: at.Add(d), Reason: []WaitReason{WaitThrottled, WaitDailyQuota}[rng.IntN(2)], Why: fmt.Sprintf("429 #%d", i%2), Measured: at, Announced: d}
		if rng.IntN(2) == 0 {
			w.ServerAt = at.Add(time.Duration(rng.IntN(21)-10) * time.Second)
			w.Reset = w.ServerAt.Add(time.Duration(rng.IntN(7200)) * time.Second)
		}
		answers = append(answers, w)
	}
	copyOf := func() Wait {
		w := answers[rng.IntN(len(answers))]
		if rng.IntN(3) > 0 {
			d := time.Duration(rng.IntN(4001)-1000) * time.Microsecond
			if rng.IntN(10) == 0 {
				d = time.Duration(rng.IntN(3)) * time.Second // a clock far off
			}
			w.Until, w.Measured = w.Until.Add(d), w.Measured.Add(d)
		}
		return w
	}
	record := func() (ws []Wait) {
		for range rng.IntN(4) {
			ws = append(ws, copyOf())
		}
		return ws
	}
	times := []time.Duration{0, time.Millisecond, 2 * time.Millisecond, time.Second, 3 * time.Second, time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour}
	for pair := range 20 {
		o, g := record(), record()
		ro, _ := json.Marshal(waitsRecord{Waits: o})
		rg, _ := json.Marshal(waitsRecord{Waits: g})
		m, err := MergeWaits(ro, rg, now)
		if err != nil {
			return err
		}
		var mr waitsRecord
		_ = json.Unmarshal(m, &mr)
		for _, w := range append(slices.Clone(o), g...) {
			for _, d := range times {
				if rem := w.Remaining(now.Add(d)); rem > 0 && !slices.ContainsFunc(mr.Waits, func(v Wait) bool { return v.Remaining(now.Add(d)) >= rem }) {
					return fmt.Errorf("pair %d: %s merged into %s: %s; at now+%v the input's wait %+v has %v left, no merged one as much", pair, rg, ro, m, d, w, rem)
				}
			}
		}
		for i, v := range mr.Waits {
			if !slices.ContainsFunc(append(slices.Clone(o), g...), func(w Wait) bool { return w.same(v) }) {
				return fmt.Errorf("pair %d: merged %s holds %+v, no input's wait", pair, m, v)
			}
			// Copies of one answer with no reset bound: the latest binds
			// as long as any, on every clock.
			if v.Reset.IsZero() && slices.ContainsFunc(mr.Waits[i+1:], func(w Wait) bool {
				return w.Reason == v.Reason && w.Why == v.Why && w.Announced == v.Announced && w.Reset.IsZero() && w.Until.Sub(w.Measured) == v.Until.Sub(v.Measured)
			}) {
				return fmt.Errorf("pair %d: merged %s holds copies of one answer", pair, m)
			}
		}
		back, _ := MergeWaits(rg, ro, now)
		if !sameWaits(m, back) {
			return fmt.Errorf("pair %d: %s and %s merge to %s one way, %s the other", pair, ro, rg, m, back)
		}
		if again, _ := MergeWaits(m, rg, now); !sameWaits(m, again) {
			return fmt.Errorf("pair %d: merged %s, merged again with %s: %s", pair, m, rg, again)
		}
	}
	return nil
}

// same says whether two waits are one (equal in every field).
func (w Wait) same(v Wait) bool {
	return w.Until.Equal(v.Until) && w.Measured.Equal(v.Measured) && w.Reason == v.Reason && w.Why == v.Why &&
		w.Announced == v.Announced && w.Reset.Equal(v.Reset) && w.ServerAt.Equal(v.ServerAt)
}

// sameWaits says whether two records hold the same waits, in any order.
func sameWaits(a, b json.RawMessage) bool {
	var ra, rb waitsRecord
	_, _ = json.Unmarshal(a, &ra), json.Unmarshal(b, &rb)
	if len(ra.Waits) != len(rb.Waits) {
		return false
	}
	for _, w := range ra.Waits {
		if !slices.ContainsFunc(rb.Waits, w.same) {
			return false
		}
	}
	return true
}
