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
// spends: this replica's level (its refill counts) less what the group's
// counts of calls add to the ones it knew (budget_group.go), the later
// next sweep; the costs and the limit of this replica's when it knows
// them. A group's record without counts (an earlier version's) merges to
// the lower level, as measured at the later time. A group's record that
// does not decode is an error (the caller keeps its own).
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
	switch {
	case len(g.Spent) > 0:
		mergeSpent(&out, o.Spent, g.Spent)
	default:
		out.Level = min(o.Level, g.Level)
		if g.At.After(o.At) {
			out.At = g.At
		}
	}
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
