package poller

import (
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// BudgetRecord is the name of the call budget's state record: the poller
// saves the budget after every sweep (and after the sweep a shutdown cut
// short) and continues from it when Run starts, so that a restarted process
// (or a replica that takes over with the group's state) is bound by it
// exactly as the one before.
const BudgetRecord = "budget"

// Records keeps the poller's state records across restarts (implemented
// by *state.Store). A missing or unreadable record is read as nothing
// known: a new budget, full for a new file, empty for a file that shows
// earlier work (a watermark or a baseline).
type Records interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (found bool, err error)
}

// LoadBudget reads the budget's record (the state report reads it from a
// stopped watcher's file); found is false when there is none.
func LoadBudget(r Records) (s BudgetState, found bool, err error) {
	found, err = r.LoadRecord(BudgetRecord, &s)
	return s, found, err
}

// restoreBudget continues rc.Budget from the record, when there is one.
func (p *Poller) restoreBudget(rc *RunConfig) {
	if rc.Records == nil {
		return
	}
	now := p.cfg.Now()
	bs, found, err := LoadBudget(rc.Records)
	if err != nil {
		p.log.Warn("call budget record unreadable: starting with an empty budget", "err", err)
		rc.Budget.StartEmpty()
		return
	}
	if !found {
		// No record, but earlier work in the file (a process killed
		// before its first save): what it spent is unknown, so the
		// budget starts empty, not full.
		if m, err := p.store.Meta(); err != nil || !m.Watermark.IsZero() || !m.Baseline.IsZero() {
			rc.Budget.StartEmpty()
			p.log.Info("call budget: no record in a state file that shows earlier work; starting with an empty budget")
		}
		return
	}
	if m, err := p.store.Meta(); err == nil && !m.BaselineDone {
		// Inside a first sync the record's costs can only be the first
		// sync's (saved by a version that counted them): no measure of a
		// sweep's cost. The level and the next sweep's time still bind.
		bs.Costs, bs.Mean, bs.Cycles = nil, 0, 0
	}
	rc.Budget.Restore(bs, now)
	if level, known := rc.Budget.Remaining(now, plenty.Throttle{}); known {
		attrs := []any{"level", int(level), "measured_at", bs.At.Format(time.RFC3339)}
		if next := rc.Budget.NotBefore(); !next.IsZero() {
			attrs = append(attrs, "next_sweep", next.Format(time.RFC3339))
		}
		p.log.Info("call budget restored from the state file", attrs...)
	}
}

// budgetSaver is rc.OnBudget with the save of the record in front: a
// failure is logged when saving starts to fail (the state file's own
// alert covers the rest), and the next save that works is logged too.
func (p *Poller) budgetSaver(rc RunConfig) func(BudgetState) {
	if rc.Records == nil {
		return rc.OnBudget
	}
	failing := false
	return func(s BudgetState) {
		err := rc.Records.SaveRecord(BudgetRecord, s)
		if now := err != nil; now != failing {
			failing = now
			if failing {
				p.log.Warn("could not persist the call budget; a restart continues from the last saved state", "record", BudgetRecord, "err", err)
			} else {
				p.log.Info("the call budget is persisted again", "record", BudgetRecord)
			}
		}
		if rc.OnBudget != nil {
			rc.OnBudget(s)
		}
	}
}
