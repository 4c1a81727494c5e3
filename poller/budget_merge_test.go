package poller

import (
	"encoding/json"
	"testing"
	"time"
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
