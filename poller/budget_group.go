package poller

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"sync"
	"time"
)

// The budget is the whole hot-standby group's (package replica): what any
// replica spends (the active, one past its lease's deadline whose call
// went out late) is taken from it once, and never refunded by another's
// save. Each budget (a process's tenure: a random key) counts the calls it
// took (Spend, a counter that only grows); a record carries every count it
// knows, and its level counts all of them. A merge takes from a level what
// another's count adds to the one it knew (MergeBudget), and the running
// budget does the same with the group's record (AbsorbGroup): a count
// seen twice is taken once, and the owner's refill, which no count holds,
// is never undone (a merge of levels would keep the lower, a refill never).

// Spend is what one budget of the group has taken from the bucket.
type Spend struct {
	Calls int64     `json:"calls"`
	At    time.Time `json:"at"` // when it last took any (its writer's clock)
}

// spentHorizon is how long a budget's count is kept after it last took
// any: longer than any tenure's record can be read late (a day's refill
// has paid it back anyway). A count older than that is not taken again.
const spentHorizon = 25 * time.Hour

func newBudgetID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// count adds calls to this budget's own count.
func (b *Budget) count(now time.Time, calls int) {
	if calls <= 0 {
		return
	}
	if b.spent == nil {
		b.spent = map[string]Spend{}
	}
	s := b.spent[b.id]
	s.Calls += int64(calls)
	s.At = now
	b.spent[b.id] = s
}

// spentSince is the counts to save: this budget's and the others' that
// took any within spentHorizon before at.
func (b *Budget) spentSince(at time.Time) map[string]Spend {
	out := map[string]Spend{}
	for k, s := range b.spent {
		if k == b.id || at.IsZero() || !s.At.Before(at.Add(-spentHorizon)) {
			out[k] = s
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// restoreSpent continues the counts of a record: they are known, its
// level counts them. Every count the record kept is known, however old at
// now: a count left out here would be taken again by absorb from a group's
// record that still lists it (the horizon is reckoned from the time of the
// record that lists it: spentSince drops it from the next save).
func (b *Budget) restoreSpent(spent map[string]Spend) {
	b.spent = map[string]Spend{}
	for k, s := range spent {
		if k != b.id && s.Calls > 0 {
			b.spent[k] = s
		}
	}
}

// budgetInbox is the group's record for a running budget to absorb (set
// by any goroutine, taken by the budget's own).
type budgetInbox struct {
	mu     sync.Mutex
	counts map[string]Spend
}

// AbsorbGroup tells the budget that saved s the group's merged record
// (replica.Absorber): the calls another replica of the group took that it
// did not know of are taken from it before its next decision. Safe for
// concurrent use with the budget.
func (s BudgetState) AbsorbGroup(merged json.RawMessage) {
	var g BudgetState
	if s.inbox == nil || json.Unmarshal(merged, &g) != nil || len(g.Spent) == 0 {
		return
	}
	s.inbox.mu.Lock()
	defer s.inbox.mu.Unlock()
	if s.inbox.counts == nil {
		s.inbox.counts = map[string]Spend{}
	}
	for k, sp := range g.Spent {
		if sp.Calls > s.inbox.counts[k].Calls {
			s.inbox.counts[k] = sp
		}
	}
}

// absorb takes from the level what the counts in the inbox add to the
// known ones (this budget's own count is its own to keep).
func (b *Budget) absorb() {
	if b.inbox == nil {
		return
	}
	b.inbox.mu.Lock()
	counts := b.inbox.counts
	b.inbox.counts = nil
	b.inbox.mu.Unlock()
	if b.spent == nil {
		b.spent = map[string]Spend{}
	}
	for k, s := range counts {
		have, known := b.spent[k]
		if k == b.id || s.Calls <= have.Calls || (!known && s.At.Before(b.at.Add(-spentHorizon))) {
			continue // as mergeSpent: a count unknown past the horizon was paid back
		}
		if b.limit > 0 {
			b.level -= float64(s.Calls - have.Calls)
		}
		b.spent[k] = s
	}
}

// mergeSpent takes from out's level (own's) what group's counts add to
// own's, and keeps the larger count of each budget.
func mergeSpent(out *BudgetState, own, group map[string]Spend) {
	out.Spent = maps.Clone(own)
	if out.Spent == nil {
		out.Spent = map[string]Spend{}
	}
	for k, s := range group {
		have, known := own[k]
		if s.Calls <= have.Calls || (!known && !out.At.IsZero() && s.At.Before(out.At.Add(-spentHorizon))) {
			continue
		}
		out.Level -= float64(s.Calls - have.Calls)
		out.Spent[k] = s
	}
}
