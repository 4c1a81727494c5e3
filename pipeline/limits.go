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
// replica's (a wait only lengthens, a budget only spends).
func LimitRecords() ([]string, map[string]replica.Limit) {
	return []string{plenty.WaitsRecord, plenty.SessionsRecord, poller.BudgetRecord}, map[string]replica.Limit{
		plenty.WaitsRecord: {Shift: plenty.ShiftWaits, Merge: func(own, group json.RawMessage, _ bool, now time.Time) (json.RawMessage, error) {
			return plenty.MergeWaits(own, group, now)
		}},
		plenty.SessionsRecord: {Shift: plenty.ShiftSessions, Merge: func(own, group json.RawMessage, _ bool, now time.Time) (json.RawMessage, error) {
			return plenty.MergeSessions(own, group, now)
		}},
		poller.BudgetRecord: {Shift: poller.ShiftBudget, Merge: func(own, group json.RawMessage, later bool, _ time.Time) (json.RawMessage, error) {
			return poller.MergeBudget(own, group, later)
		}},
	}
}
