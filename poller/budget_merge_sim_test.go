package poller

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

var (
	mergeSimSeeds = flag.Int("merge-sim-seeds", 0, "TestBudgetMergeSimulation: seeds to run (0: 25; make merge-sim runs many)")
	mergeSimFirst = flag.Uint64("merge-sim-first", 1, "TestBudgetMergeSimulation: the first seed")
)

// TestBudgetMergeSimulation: seeded random histories of one shop's budget
// kept by a group of three replicas (the first starts it, the others take
// over from the group's record merged with their own last save, now and
// then), each taking calls, saving its record, merging it into the
// group's and absorbing the group's. The judge is the bucket itself: a
// record may never allow more than the bucket with exactly the calls its
// counts hold taken at the times they were taken (a refund otherwise);
// every merge, either way round, is judged, and merges the same level,
// time and counts both ways (at least each input's counts); a merge
// merged again with an input changes nothing.
func TestBudgetMergeSimulation(t *testing.T) {
	seeds := *mergeSimSeeds
	if seeds <= 0 {
		seeds = 25
	}
	for seed := *mergeSimFirst; seed < *mergeSimFirst+uint64(seeds); seed++ {
		if err := budgetMergeSeed(seed); err != nil {
			t.Fatalf("seed %d: %v\nreplay: go test -run TestBudgetMergeSimulation ./poller -args -merge-sim-first=%d -merge-sim-seeds=1", seed, err, seed)
		}
	}
}

// budgetTake is one Take of the simulated group: by budget id, calls,
// its count after it.
type budgetTake struct {
	at    time.Time
	id    string
	calls int
	count int64
}

// bucketOf is the level at now of the bucket with the takes a record's
// counts hold (the rest left out), full at the first take.
func bucketOf(takes []budgetTake, counts map[string]Spend, rate, capacity float64, now time.Time) float64 {
	if len(takes) == 0 {
		return capacity
	}
	level, at := capacity, takes[0].at
	for _, tk := range takes {
		if tk.count > counts[tk.id].Calls {
			continue
		}
		level = min(level+rate*tk.at.Sub(at).Seconds(), capacity) - float64(tk.calls)
		at = tk.at
	}
	return min(level+rate*now.Sub(at).Seconds(), capacity)
}

func budgetMergeSeed(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x6d65726765))
	const daily = 166000
	th := plenty.Throttle{Long: plenty.Period{Present: true, Limit: daily, CallsLeft: -1}}
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	probe := NewBudget(0.25)
	probe.Take(now, 0, th)
	rate, capacity := probe.rate(), probe.capacity()

	var takes []budgetTake
	budgets := make([]*Budget, 3)
	saved := make([]json.RawMessage, 3)
	var group json.RawMessage
	budgets[0] = NewBudget(0.25)
	judge := func(what string, raw json.RawMessage) error {
		var s BudgetState
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		b := NewBudget(0.25)
		b.Restore(s, now)
		got, _ := b.Remaining(now, plenty.Throttle{})
		if limit := bucketOf(takes, s.Spent, rate, capacity, now); got > limit+1e-6 {
			return fmt.Errorf("%s at %v allows %.1f calls, the bucket with the calls it counts %.1f: a refund (%s)", what, now, got, limit, raw)
		}
		return nil
	}
	for step := range 80 {
		now = now.Add(time.Duration(rng.Int64N(int64(20 * time.Minute))))
		i := rng.IntN(3)
		switch op := rng.IntN(10); {
		case budgets[i] == nil || op == 0:
			// i takes over (or restarts): its last save merged with the group's.
			if group == nil {
				continue
			}
			m, err := MergeBudget(saved[i], group, false)
			if err != nil {
				return err
			}
			if err := judge(fmt.Sprintf("step %d: %d's takeover", step, i), m); err != nil {
				return err
			}
			var s BudgetState
			_ = json.Unmarshal(m, &s)
			budgets[i] = NewBudget(0.25)
			budgets[i].Restore(s, now)
			saved[i] = m
		case op < 6:
			calls := 1 + rng.IntN(1500)
			all := map[string]Spend{}
			for _, tk := range takes {
				all[tk.id] = Spend{Calls: tk.count}
			}
			if bucketOf(takes, all, rate, capacity, now)-float64(calls) < -0.5*0.25*daily {
				continue // a day's debt and more is clamped at a restore: not this test's
			}
			b := budgets[i]
			b.Take(now, calls, th)
			takes = append(takes, budgetTake{at: now, id: b.id, calls: calls, count: b.spent[b.id].Calls})
		default:
			raw, _ := json.Marshal(budgets[i].Snapshot())
			saved[i] = raw
			if err := judge(fmt.Sprintf("step %d: %d's save", step, i), raw); err != nil {
				return err
			}
			if group == nil {
				group = raw
				continue
			}
			m, err := MergeBudget(raw, group, false)
			if err != nil {
				return err
			}
			if err := judge(fmt.Sprintf("step %d: %d's write of the group's", step, i), m); err != nil {
				return err
			}
			group = m
			budgets[i].Snapshot().AbsorbGroup(group)
		}
		if step%4 == 3 {
			if err := checkBudgetPairs(step, judge, append([]json.RawMessage{group}, saved...)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkBudgetPairs merges every two of recs both ways: each judged, the
// same level, time and counts either way, at least each one's counts, and
// unchanged when merged with an input again.
func checkBudgetPairs(step int, judge func(string, json.RawMessage) error, recs []json.RawMessage) error {
	for x, a := range recs {
		for y, b := range recs {
			if x >= y || a == nil || b == nil {
				continue
			}
			ab, err1 := MergeBudget(a, b, false)
			ba, err2 := MergeBudget(b, a, false)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("step %d: %v %v", step, err1, err2)
			}
			for _, m := range []json.RawMessage{ab, ba} {
				if err := judge(fmt.Sprintf("step %d: records %d and %d merged", step, x, y), m); err != nil {
					return err
				}
			}
			var sa, sb, mab, mba BudgetState
			_, _, _, _ = json.Unmarshal(a, &sa), json.Unmarshal(b, &sb), json.Unmarshal(ab, &mab), json.Unmarshal(ba, &mba)
			if math.Abs(mab.Level-mba.Level) > 1e-6 || !mab.At.Equal(mba.At) || !maps.Equal(mab.Spent, mba.Spent) {
				return fmt.Errorf("step %d: records %d and %d merge to %s one way, %s the other", step, x, y, ab, ba)
			}
			for _, in := range []BudgetState{sa, sb} {
				for k, s := range in.Spent {
					if mab.Spent[k].Calls < s.Calls && !s.At.Before(mab.At.Add(-spentHorizon)) {
						return fmt.Errorf("step %d: records %d and %d merged count %d calls of %s, an input %d", step, x, y, mab.Spent[k].Calls, k, s.Calls)
					}
				}
			}
			again, _ := MergeBudget(ab, b, false)
			var ma BudgetState
			_ = json.Unmarshal(again, &ma)
			if math.Abs(ma.Level-mab.Level) > 1e-6 || !ma.At.Equal(mab.At) {
				return fmt.Errorf("step %d: records %d and %d merged (%s) and merged again with %d: %s", step, x, y, ab, y, again)
			}
		}
	}
	return nil
}
