package poller

import (
	"encoding/json"
	"fmt"
	"time"
)

// The budget is kept by the whole hot-standby group (package replica), as
// the client's waits are (plenty.MergeWaits): a replica merges the group's
// copy with its own, and a merge only spends.

// ShiftBudget moves the local-clock times of a "budget" record by d (when
// the level was measured, the next sweep's earliest start); Checked, on
// the service's timeline, stays.
func ShiftBudget(raw json.RawMessage, d time.Duration) (json.RawMessage, error) {
	var s BudgetState
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("record %s: %w", BudgetRecord, err)
	}
	if !s.At.IsZero() {
		s.At = s.At.Add(d)
	}
	if !s.Next.IsZero() {
		s.Next = s.Next.Add(d)
	}
	for k, sp := range s.Spent {
		sp.At = sp.At.Add(d)
		s.Spent[k] = sp
	}
	return json.Marshal(s)
}

// MergeBudget combines this replica's "budget" record with the group's
// (on this replica's clock). With newer the group's is a later state of
// the same budget (written after the checkpoint this replica restored,
// by that checkpoint's writer) and replaces it. Otherwise the merge only
// spends, whichever of the two is older: the level measured later (its
// refill counts, whoever wrote it) less what the other's counts of calls
// add to the ones it knew (budget_group.go), the later next sweep; the
// costs and the limit of this replica's when it knows them. Taken from
// the earlier level instead, those calls would be paid back by the
// refill between the two times, which a full bucket never held: a refund
// (two levels measured at one time merge to the lower). A record without
// counts (an earlier version's, or a budget that took none) merges to the
// lower level, as measured at the later time, with the other's counts. A group's
// record that does not decode is an error (the caller keeps its own).
func MergeBudget(own, group json.RawMessage, newer bool) (json.RawMessage, error) {
	var g, o BudgetState
	if err := json.Unmarshal(group, &g); err != nil {
		return nil, fmt.Errorf("record %s: %w", BudgetRecord, err)
	}
	if newer || len(own) == 0 || json.Unmarshal(own, &o) != nil || o.Limit <= 0 || o.At.IsZero() {
		return json.Marshal(g)
	}
	if g.Limit <= 0 || g.At.IsZero() {
		return json.Marshal(o)
	}
	out := o
	out.Level, out.At, out.Spent = mergeLevels(o, g)
	if g.Next.After(o.Next) {
		out.Next, out.Gap = g.Next, g.Gap
	}
	if out.Cycles <= 0 {
		out.Costs, out.Mean, out.Cycles = g.Costs, g.Mean, g.Cycles
	}
	if out.Checked.IsZero() {
		out.Checked = g.Checked
	}
	return json.Marshal(out)
}

// mergeLevels is the level of two budgets' records merged (MergeBudget),
// when it was measured, and the counts it holds.
func mergeLevels(o, g BudgetState) (float64, time.Time, map[string]Spend) {
	from := func(base, other BudgetState) BudgetState {
		mergeSpent(&base, base.Spent, other.Spent)
		return base
	}
	if len(o.Spent) == 0 || len(g.Spent) == 0 {
		// The lower level, with the counts of the record that has them:
		// at most that record's level, which counts them. Without them
		// (the lower's own, none), the level of a record without counts
		// (an earlier version's) stood at every later merge, its debt
		// restored by every takeover for good.
		spent := o.Spent
		if len(spent) == 0 {
			spent = g.Spent
		}
		return min(o.Level, g.Level), later(o.At, g.At), spent
	}
	switch {
	case o.At.After(g.At):
		m := from(o, g)
		return m.Level, m.At, m.Spent
	case g.At.After(o.At):
		m := from(g, o)
		return m.Level, m.At, m.Spent
	}
	a, b := from(o, g), from(g, o)
	return min(a.Level, b.Level), a.At, a.Spent
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
