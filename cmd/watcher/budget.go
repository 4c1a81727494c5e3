package main

import (
	"fmt"
	"io"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
)

// State records of the call budget and of the waits the service asked for
// (budget engineer): they bind a restarted process exactly as they bound
// the one before it.
const (
	recordBudget = "budget" // poller.BudgetState
	recordWaits  = "waits"  // waitsRecord
)

// waitsRecord is the pending wait of the pacer (none: empty).
type waitsRecord struct {
	Waits []plenty.Wait `json:"waits"`
}

// restoreBudget builds the sweeps' call budget and continues it, and the
// pacer's pending wait, from the state file. A record that is missing or
// unreadable is "nothing known": a new budget (full), no wait.
func (d *daemon) restoreBudget() {
	now := time.Now()
	budget := poller.NewBudget(d.cfg.CallShare)
	defer func() {
		d.wmu.Lock()
		d.budget = budget
		d.wmu.Unlock()
	}()
	var bs poller.BudgetState
	if found, err := d.store.LoadRecord(recordBudget, &bs); err != nil {
		d.log.Warn("call budget record unreadable: starting with a new budget", "err", err)
	} else if found {
		budget.Restore(bs, now)
		level, known := budget.Remaining(now, plenty.Throttle{})
		if known {
			attrs := []any{"level", int(level), "measured_at", bs.At.Format(time.RFC3339)}
			if next := budget.NotBefore(); !next.IsZero() {
				attrs = append(attrs, "next_sweep", next.Format(time.RFC3339))
			}
			d.log.Info("call budget restored from the state file", attrs...)
		}
	}
	var wr waitsRecord
	if found, err := d.store.LoadRecord(recordWaits, &wr); err != nil {
		d.log.Warn("record of the service's waits unreadable: none assumed", "err", err)
	} else if found {
		if w, ok := d.cl().Pacer().Restore(wr.Waits...); ok {
			d.log.Warn("a wait the service asked for before the restart is still pending: no call before it ends",
				"until", w.Until.UTC().Format(time.RFC3339), "reason", string(w.Reason), "why", w.Why)
		}
	}
}

// saveBudget persists the budget after a sweep (the poller's OnBudget).
func (d *daemon) saveBudget(s poller.BudgetState) { d.saveRecord(recordBudget, s) }

// saveRecord saves one of the budget's records; a failure is logged when
// saving starts to fail (the state file's own alert covers the rest), and
// the next save that works is logged too.
func (d *daemon) saveRecord(name string, v any) {
	err := d.store.SaveRecord(name, v)
	if failing := err != nil; d.saveErr.Swap(failing) != failing {
		if failing {
			d.log.Warn("could not persist the call budget or the service's wait; a restart continues from the last saved state", "record", name, "err", err)
		} else {
			d.log.Info("the call budget and the service's wait are persisted again", "record", name)
		}
	}
}

// saveWait persists the pacer's pending wait whenever it changes (the
// client's OnWait).
func (d *daemon) saveWait(w plenty.Wait) { d.saveRecord(recordWaits, newWaitsRecord(w)) }

// newWaitsRecord is the record of the pending wait w (none: the zero Wait).
func newWaitsRecord(w plenty.Wait) waitsRecord {
	rec := waitsRecord{Waits: []plenty.Wait{}}
	if !w.Until.IsZero() {
		rec.Waits = append(rec.Waits, w)
	}
	return rec
}

// paused says why no call is made for now: the daily quota is spent (the
// service's own wait or the reserve kept for the shop's other
// integrations), until its reset.
func (d *daemon) paused() (string, bool) {
	w, ok := d.cl().Pacer().Pending()
	if !ok || w.Reason != plenty.WaitDailyQuota {
		return "", false
	}
	return pausedText(w), true
}

// pausedText is the readiness and state report text of a pending wait.
func pausedText(w plenty.Wait) string {
	return fmt.Sprintf("paused until %s: %s", w.Until.UTC().Format(time.RFC3339), w.Reason.Text())
}

// pausedReport is a pending wait in the state report.
type pausedReport struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"` // daily_quota, throttled, period_reserve
	Text   string    `json:"text"`   // "paused until T: daily quota spent"
	Why    string    `json:"why"`    // what the service said
}

func newPausedReport(w plenty.Wait, pending bool) *pausedReport {
	if !pending {
		return nil
	}
	return &pausedReport{Until: w.Until, Reason: string(w.Reason), Text: pausedText(w), Why: w.Why}
}

// budgetReport is the call budget as last saved (after the last sweep).
type budgetReport struct {
	Level      float64   `json:"level"`      // calls left in the bucket; negative = debt
	MeasuredAt time.Time `json:"measuredAt"` // local clock
	DailyLimit int       `json:"dailyLimit"` // as the service named it
	NextSweep  time.Time `json:"nextSweep,omitzero"`
}

// budgetReports reads the records of the budget and of the pending wait
// from the state file (the watcher need not run): the wait as a restarted
// process at now would honour it. Unreadable records are left out.
func budgetReports(s interface {
	LoadRecord(string, any) (bool, error)
}, now time.Time) (*pausedReport, *budgetReport) {
	var paused *pausedReport
	var wr waitsRecord
	if found, err := s.LoadRecord(recordWaits, &wr); err == nil && found {
		p := plenty.NewPacer(plenty.PacerConfig{Now: func() time.Time { return now }})
		paused = newPausedReport(p.Restore(wr.Waits...))
	}
	var bs poller.BudgetState
	if found, err := s.LoadRecord(recordBudget, &bs); err != nil || !found || bs.Limit <= 0 {
		return paused, nil
	}
	return paused, &budgetReport{Level: bs.Level, MeasuredAt: bs.At, DailyLimit: bs.Limit, NextSweep: bs.Next}
}

// printBudgetReport adds the pending wait and the budget to the text of
// `watcher state`.
func printBudgetReport(w io.Writer, rep stateReport, now time.Time) {
	if rep.Paused != nil {
		fmt.Fprintf(w, "paused         %s (%s)\n", rep.Paused.Text, rep.Paused.Why)
	}
	if b := rep.Budget; b != nil {
		fmt.Fprintf(w, "call budget    %.0f calls of the daily limit %d's share, as of %s (%s ago)\n",
			b.Level, b.DailyLimit, b.MeasuredAt.Format(time.RFC3339), now.Sub(b.MeasuredAt).Round(time.Second))
	}
}
