package poller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// TestMergeBudgetOnlySpends: two budgets of different lineages merge to
// the lower level at the later time; the group's later state of the same
// budget replaces the own; a group's record that does not decode is an
// error.
func TestMergeBudgetOnlySpends(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rec := func(level float64, at time.Time) json.RawMessage {
		b, _ := json.Marshal(BudgetState{Level: level, At: at, Limit: 166000, Cycles: 3, Mean: 10})
		return b
	}
	for _, c := range []struct {
		name       string
		own, group json.RawMessage
		later      bool
		level      float64
		at         time.Time
	}{
		{"group spent more", rec(500, t0), rec(100, t0.Add(time.Minute)), false, 100, t0.Add(time.Minute)},
		{"own spent more", rec(50, t0.Add(time.Minute)), rec(400, t0), false, 50, t0.Add(time.Minute)},
		{"group's later state", rec(50, t0), rec(400, t0.Add(time.Minute)), true, 400, t0.Add(time.Minute)},
		{"no own", nil, rec(400, t0), false, 400, t0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := MergeBudget(c.own, c.group, c.later)
			if err != nil {
				t.Fatal(err)
			}
			var s BudgetState
			_ = json.Unmarshal(m, &s)
			if s.Level != c.level || !s.At.Equal(c.at) {
				t.Errorf("merged level %v at %v, want %v at %v", s.Level, s.At, c.level, c.at)
			}
		})
	}
	if _, err := MergeBudget(rec(5, t0), json.RawMessage(`{"level":"x"}`), false); err == nil {
		t.Error("a group's record that does not decode merged without an error")
	}
}

// TestMergeBudgetKeepsTheOwnersRefill: the owner's level, refilled since
// the group's copy, merges with that copy (written by itself, or by
// another replica that spent 40 calls more) to its own level less the 40
// calls it did not know of: the refill stays, the other's spend is taken
// once, however often the two are merged again.
func TestMergeBudgetKeepsTheOwnersRefill(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rec := func(level float64, at time.Time, spent map[string]Spend) json.RawMessage {
		b, _ := json.Marshal(BudgetState{Level: level, At: at, Limit: 166000, Spent: spent})
		return b
	}
	group := rec(100, t0, map[string]Spend{"own": {Calls: 10, At: t0}})
	own := rec(500, t0.Add(10*time.Minute), map[string]Spend{"own": {Calls: 12, At: t0.Add(time.Minute)}})
	level := func(raw json.RawMessage) float64 {
		var s BudgetState
		_ = json.Unmarshal(raw, &s)
		return s.Level
	}
	m, err := MergeBudget(own, group, false)
	if err != nil || level(m) != 500 {
		t.Errorf("merged with its own earlier copy: level %v (%v), want the refilled 500", level(m), err)
	}
	other := rec(60, t0, map[string]Spend{"own": {Calls: 10, At: t0}, "x": {Calls: 40, At: t0}})
	m, _ = MergeBudget(own, other, false)
	if level(m) != 460 {
		t.Errorf("merged with x's 40 calls: level %v, want 460", level(m))
	}
	m, _ = MergeBudget(m, other, false)
	if level(m) != 460 {
		t.Errorf("merged with x's 40 calls twice: level %v, want 460 (taken once)", level(m))
	}
}

// TestBudgetAbsorbsTheGroupsSpend: a running budget is told the group's
// record in which another replica spent 30 calls: its level drops by 30
// once (a second telling of the same count takes nothing), and its own
// refill and spends go on.
func TestBudgetAbsorbsTheGroupsSpend(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	full := plenty.Throttle{Long: plenty.Period{Present: true, Limit: 86400 * 4, CallsLeft: -1}}
	b := NewBudget(0.25)
	b.Take(t0, 100, full)
	start, _ := b.Remaining(t0, full)
	saved := b.Snapshot()
	other := saved
	other.Spent = map[string]Spend{"x": {Calls: 30, At: t0}}
	for k, v := range saved.Spent {
		other.Spent[k] = v
	}
	raw, _ := json.Marshal(other)
	saved.AbsorbGroup(raw)
	saved.AbsorbGroup(raw)
	if got, _ := b.Remaining(t0, full); got != start-30 {
		t.Errorf("level %v after x's 30 calls, want %v", got, start-30)
	}
	saved.AbsorbGroup(raw)
	if got, _ := b.Remaining(t0.Add(10*time.Second), full); got != start-30+10 {
		t.Errorf("level %v 10 s later (1 call a second refilled), want %v", got, start-30+10)
	}
}
