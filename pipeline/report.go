package pipeline

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// Report is what the state file holds, for `watcher state` and the
// watcher's GET /state. It never carries the session token.
type Report struct {
	StateFile     string    `json:"stateFile"`
	FileSizeBytes int64     `json:"fileSizeBytes"`
	SchemaVersion int       `json:"schemaVersion"`
	Watermark     time.Time `json:"watermark,omitzero"` // every change up to here has been recorded
	Baseline      time.Time `json:"baseline,omitzero"`  // upper end of the first sweep
	LastSweep     time.Time `json:"lastSweep,omitzero"` // end of the last verified sweep (local clock)
	OrdersTracked int       `json:"ordersTracked"`
	OutboxDepth   int       `json:"outboxDepth"`
	FirstSync     FirstSync `json:"firstSync"`
	// Quarantine lists the orders whose entries cannot be decoded, with
	// the raw reason.
	Quarantine []state.Quarantined `json:"quarantine"`

	Paused *PausedReport `json:"paused,omitempty"` // a pending wait the service asked for
	Budget *BudgetReport `json:"budget,omitempty"` // the sweeps' call budget as last saved

	// Lease is the hot standby's view; only from a running watcher.
	Lease *replica.Report `json:"lease,omitempty"`
	// Timings in force and why; for a stopped watcher, as last recorded.
	Timings *TimingsReport `json:"timings,omitempty"`
}

// FirstSync is the progress of the first sweep (the baseline): the share of
// its window, from the start point to the baseline, below the watermark.
type FirstSync struct {
	Done     bool    `json:"done"`
	Progress float64 `json:"progress"` // 0..1
}

// OrderReport is one order's tracked state (GET /state/orders/{id}).
type OrderReport struct {
	OrderID int64       `json:"orderId"`
	State   *diff.State `json:"state"` // the shape of an event's data.after; null when never read
	// StatusSince is when the order entered its status, a lower bound of
	// its time in it (diff.EnteredStatus); absent when State is null.
	StatusSince *order.Time `json:"statusSince,omitempty"`
	// Quarantine is set while the order's entry cannot be decoded.
	Quarantine *state.Quarantined `json:"quarantine,omitempty"`
}

// NewReport reads the report from an open state file. start is the
// configured start point (WATCHER_START_FROM) of the first sweep.
func NewReport(s *state.Store, start StartFrom) (Report, error) {
	st, err := s.Stats()
	if err != nil {
		return Report{}, err
	}
	qs, err := s.Quarantine()
	if err != nil {
		return Report{}, err
	}
	if qs == nil {
		qs = []state.Quarantined{} // an empty list in JSON
	}
	rep := Report{
		StateFile: s.Path(), FileSizeBytes: st.FileSize, SchemaVersion: st.SchemaVersion,
		Watermark: st.Watermark, Baseline: st.Baseline, LastSweep: st.LastSweep,
		OrdersTracked: st.Orders, OutboxDepth: st.OutboxDepth,
		FirstSync:  FirstSync{Done: st.BaselineDone, Progress: firstSyncProgress(st, start)},
		Quarantine: qs,
	}
	rep.Paused, rep.Budget = budgetReports(s, time.Now())
	return rep, nil
}

// StoppedReport is the report of a state file no watcher runs on: the
// timings as last recorded.
func StoppedReport(s *state.Store, cfg *Config) (Report, error) {
	rep, err := NewReport(s, cfg.StartFrom)
	if err != nil {
		return rep, err
	}
	rep.Timings = newTimingsReport(poller.NewTimings(poller.TimingsConfig{Settle: cfg.Settle, Overlap: cfg.Overlap, Records: s}).InForce())
	return rep, nil
}

// firstSyncProgress: 1 once the baseline is done, else how far the
// watermark has come from the start point towards the baseline. A start
// given as a duration was taken back from the first start, when the baseline
// was recorded (the settle time apart).
func firstSyncProgress(st state.Stats, start StartFrom) float64 {
	if st.BaselineDone {
		return 1
	}
	if st.Baseline.IsZero() || st.Watermark.IsZero() {
		return 0
	}
	from := start.At
	if from.IsZero() {
		from = st.Baseline.Add(-start.Back)
	}
	total := st.Baseline.Sub(from)
	if total <= 0 {
		return 0
	}
	return min(max(float64(st.Watermark.Sub(from))/float64(total), 0), 1)
}

// LookupOrder reads one order's tracked state and quarantine record; ok
// is false when the order is neither tracked nor quarantined.
func LookupOrder(s *state.Store, id int64) (OrderReport, bool, error) {
	out := make([]*diff.State, 1)
	if err := s.Lookup([]int64{id}, out); err != nil {
		return OrderReport{}, false, err
	}
	rep := OrderReport{OrderID: id, State: out[0]}
	if out[0] != nil {
		rep.StatusSince = new(out[0].Since())
	}
	q, found, err := s.QuarantinedOrder(id)
	if err != nil {
		return OrderReport{}, false, err
	}
	if found {
		rep.Quarantine = &q
	}
	return rep, rep.State != nil || found, nil
}

// ParseOrderID reads an order id of the command line or a URL.
func ParseOrderID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("order id %q: want a positive whole number", s)
	}
	return id, nil
}

// PausedReport is a pending wait in the state report.
type PausedReport struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"` // daily_quota, throttled, period_reserve
	Text   string    `json:"text"`   // "paused until T: daily quota spent"
	Why    string    `json:"why"`    // what the service said
}

func newPausedReport(w plenty.Wait, pending bool) *PausedReport {
	if !pending {
		return nil
	}
	return &PausedReport{Until: w.Until, Reason: string(w.Reason), Text: PausedText(w), Why: w.Why}
}

// BudgetReport is the call budget as last saved (after the last sweep).
type BudgetReport struct {
	Level      float64   `json:"level"`      // calls left in the bucket; negative = debt
	MeasuredAt time.Time `json:"measuredAt"` // local clock
	DailyLimit int       `json:"dailyLimit"` // as the service named it
	NextSweep  time.Time `json:"nextSweep,omitzero"`
}

// budgetReports reads the records of the budget (the poller's) and of the
// pending wait (the client's) from the state file (the watcher need not
// run): the wait as a restarted process at now would honour it. Unreadable
// records are left out.
func budgetReports(s *state.Store, now time.Time) (*PausedReport, *BudgetReport) {
	var paused *PausedReport
	if waits, found, err := plenty.LoadWaits(s); err == nil && found {
		paused = newPausedReport(plenty.PendingWait(now, waits...))
	}
	bs, found, err := poller.LoadBudget(s)
	if err != nil || !found || bs.Limit <= 0 {
		return paused, nil
	}
	return paused, &BudgetReport{Level: bs.Level, MeasuredAt: bs.At, DailyLimit: bs.Limit, NextSweep: bs.Next}
}

// TimingsReport is the state report's part on the timings in force.
type TimingsReport struct {
	IntervalSeconds float64 `json:"intervalSeconds,omitempty"`
	SettleSeconds   float64 `json:"settleSeconds"`
	OverlapSeconds  float64 `json:"overlapSeconds"`
	poller.InForce
}

func newTimingsReport(in poller.InForce) *TimingsReport {
	return &TimingsReport{IntervalSeconds: in.Interval.Seconds(), SettleSeconds: in.Settle.Seconds(), OverlapSeconds: in.Overlap.Seconds(), InForce: in}
}

// WriteText prints the report for a person (`watcher state`).
func (rep Report) WriteText(w io.Writer, now time.Time) {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC3339), now.Sub(t).Round(time.Second))
	}
	sync := "done"
	switch {
	case rep.FirstSync.Done:
	case rep.Baseline.IsZero():
		sync = "not started"
	default:
		sync = fmt.Sprintf("in progress: %.0f%%", 100*rep.FirstSync.Progress)
	}
	fmt.Fprintf(w, "state file     %s (%d bytes, schema %d)\n", rep.StateFile, rep.FileSizeBytes, rep.SchemaVersion)
	fmt.Fprintf(w, "watermark      %s\n", ts(rep.Watermark))
	fmt.Fprintf(w, "baseline       %s\n", ts(rep.Baseline))
	fmt.Fprintf(w, "first sync     %s\n", sync)
	fmt.Fprintf(w, "last sweep     %s\n", ts(rep.LastSweep))
	fmt.Fprintf(w, "orders         %d\n", rep.OrdersTracked)
	fmt.Fprintf(w, "outbox depth   %d\n", rep.OutboxDepth)
	writeRole(w, rep.Lease)
	writeQuarantine(w, rep.Quarantine, now)
	rep.writeBudget(w, now)
	writeTimings(w, rep.Timings)
}

// writeRole prints the replica's role in its group and who holds the lease.
func writeRole(w io.Writer, l *replica.Report) {
	if l == nil {
		fmt.Fprintln(w, "role           no lease (a stopped watcher's file, or WATCHER_LEASE=false)")
		return
	}
	holder := "none"
	if l.Holder != "" {
		holder = l.Holder
		if l.HolderAt != "" {
			holder += " (host " + l.HolderAt + ")"
		}
	}
	fmt.Fprintf(w, "role           %s (this replica: %s), holder %s\n", l.Role, l.Instance, holder)
	if l.Unproven != "" {
		fmt.Fprintf(w, "  unproven snapshot: %s\n", l.Unproven)
	}
}

// writeQuarantine prints the quarantined orders of the text report.
func writeQuarantine(w io.Writer, qs []state.Quarantined, now time.Time) {
	fmt.Fprintf(w, "quarantined    %d\n", len(qs))
	const most = 20
	for i, q := range qs {
		if i == most {
			fmt.Fprintf(w, "  ... %d more (watcher state -json lists every one)\n", len(qs)-most)
			break
		}
		updated := q.UpdatedAt
		if updated == "" {
			updated = "unreadable"
		}
		fmt.Fprintf(w, "  order %d: %s (updatedAt %s; first seen %s ago, last %s ago, %d reads)\n", q.OrderID, q.Reason, updated,
			now.Sub(q.FirstSeen).Round(time.Second), now.Sub(q.LastSeen).Round(time.Second), q.Attempts)
	}
}

// writeBudget prints the pending wait and the budget.
func (rep Report) writeBudget(w io.Writer, now time.Time) {
	if rep.Paused != nil {
		fmt.Fprintf(w, "paused         %s (%s)\n", rep.Paused.Text, rep.Paused.Why)
	}
	if b := rep.Budget; b != nil {
		fmt.Fprintf(w, "call budget    %.0f calls of the daily limit %d's share, as of %s (%s ago)\n",
			b.Level, b.DailyLimit, b.MeasuredAt.Format(time.RFC3339), now.Sub(b.MeasuredAt).Round(time.Second))
	}
}

// writeTimings prints the timings.
func writeTimings(w io.Writer, t *TimingsReport) {
	if t == nil {
		return
	}
	interval := "not known yet"
	if t.IntervalSource != "" {
		interval = fmt.Sprintf("%gs (%s)", t.IntervalSeconds, t.IntervalSource)
	}
	fmt.Fprintf(w, "interval       %s\n", interval)
	fmt.Fprintf(w, "settle         %gs (%s)\n", t.SettleSeconds, t.SettleSource)
	fmt.Fprintf(w, "overlap        %gs (%s; %d late arrivals in the last day, %d beyond the overlap)\n", t.OverlapSeconds, t.OverlapSource, t.LateArrivals, t.BeyondOverlap)
}
