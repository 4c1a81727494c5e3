package pipeline

import (
	"encoding/json"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
)

// LimitRecords are the records that bind the shop's calls, kept by the
// whole hot-standby group, with how the group's copy merges with a
// replica's (a wait only lengthens, a budget only spends). The sealed
// session is one of them: saved after a login or renewal, before the
// first call with it, it reaches the group then, not with the next
// checkpoint (a kill inside a long sweep after a login handed the
// successor the session before, and it logged in again: a session more
// towards the shop's limit). Its merge is the default one (the group's
// when it is a later state of this replica's, else this replica's), and
// the next checkpoint carries it too.
func LimitRecords() ([]string, map[string]replica.Limit) {
	return []string{plenty.WaitsRecord, plenty.SessionsRecord, poller.BudgetRecord, plenty.SealedSessionRecord}, map[string]replica.Limit{
		plenty.WaitsRecord: {Shift: plenty.ShiftWaits, Merge: func(own, group json.RawMessage, _ bool, now time.Time) (json.RawMessage, error) {
			return plenty.MergeWaits(own, group, now)
		}},
		plenty.SessionsRecord: {Shift: plenty.ShiftSessions, Merge: func(own, group json.RawMessage, _ bool, now time.Time) (json.RawMessage, error) {
			return plenty.MergeSessions(own, group, now)
		}},
		poller.BudgetRecord: {Shift: poller.ShiftBudget, Merge: func(own, group json.RawMessage, later bool, _ time.Time) (json.RawMessage, error) {
			return poller.MergeBudget(own, group, later)
		}},
		plenty.SealedSessionRecord: {Checkpointed: true},
	}
}

// GroupLimits applies the group's waits and sessions, merged into the
// state file by the replica while this one is active, to the running
// client (replica.LimitsApplier). The budget's calls reach the running
// budget through the record it saved (replica.Absorber).
func (w *Watcher) GroupLimits() {
	w.cl().AdoptSessions()
	waits, _, err := plenty.LoadWaits(w.store)
	if err != nil || len(waits) == 0 {
		return
	}
	if wt, ok := w.cl().Pacer().Restore(waits...); ok {
		w.log.Warn("a wait another replica of the group was told: no call before it ends", "until", wt.Until.UTC().Format(time.RFC3339), "why", wt.Why)
	}
}

// GroupLimits: the replica is given hooks{w}, not the Watcher: without
// this method the running client never heard of another replica's wait.
func (p hooks) GroupLimits() { p.w.GroupLimits() }

var _ replica.LimitsApplier = hooks{}
