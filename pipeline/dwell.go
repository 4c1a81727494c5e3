package pipeline

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/state"
)

// The dwell metrics: per status of the snapshot, how many orders are in it
// and how long the longest-waiting one has been there (state.Store.Dwell,
// one scan of the snapshot every DwellEvery). They are this replica's
// snapshot's: a standby reports its mirrored snapshot.

// DwellEvery is how often the dwell figures are computed.
const DwellEvery = time.Minute

// MaxStatusLabels bounds the values of the dwell metrics' status label:
// when the snapshot holds more statuses, the MaxStatusLabels-1 with the
// most orders keep their own and the rest are summed under "other".
const MaxStatusLabels = 100

// Status label values besides a status number.
const (
	statusNone  = "none"  // orders without a status (as the subject token)
	statusOther = "other" // the statuses beyond MaxStatusLabels
)

// dwellSource is what the dwell metrics read (*state.Store).
type dwellSource interface {
	Dwell() ([]state.StatusDwell, error)
}

// dwellRow is one status label's figures.
type dwellRow struct {
	status string
	orders int
	oldest time.Time // zero: unknown
}

// dwellRows turns a scan into label rows: status numbers in canonical form,
// "none" for orders without a status, and at most max rows (the rest under
// "other", see MaxStatusLabels), in the scan's order (by status), other last.
func dwellRows(d []state.StatusDwell, max int) []dwellRow {
	rows := make([]dwellRow, 0, len(d))
	for _, s := range d {
		label := s.Status.Canonical()
		if label == "" {
			label = statusNone
		}
		rows = append(rows, dwellRow{status: label, orders: s.Orders, oldest: s.Oldest})
	}
	if len(rows) <= max {
		return rows
	}
	// Keep the statuses with the most orders (ties: the lower status).
	byOrders := slices.Clone(rows)
	slices.SortStableFunc(byOrders, func(a, b dwellRow) int { return cmp.Compare(b.orders, a.orders) })
	keep := make(map[string]bool, max-1)
	for _, r := range byOrders[:max-1] {
		keep[r.status] = true
	}
	out := make([]dwellRow, 0, max)
	other := dwellRow{status: statusOther}
	for _, r := range rows {
		if keep[r.status] {
			out = append(out, r)
			continue
		}
		other.orders += r.orders
		if !r.oldest.IsZero() && (other.oldest.IsZero() || r.oldest.Before(other.oldest)) {
			other.oldest = r.oldest
		}
	}
	return append(out, other)
}

// dwellCollector exports the last scan; the ages are computed at the
// scrape (the time since the oldest entry), so they grow between scans.
type dwellCollector struct {
	src dwellSource
	now func() time.Time

	mu      sync.Mutex
	rows    []dwellRow
	scanned time.Time // when the last scan ended; zero before the first
	took    time.Duration

	orders, age, duration, at *prometheus.Desc
}

func newDwellCollector(src dwellSource, now func() time.Time) *dwellCollector {
	return &dwellCollector{
		src: src, now: now,
		orders: prometheus.NewDesc("orderwatch_status_orders",
			"Orders of the snapshot per status (status \"none\": without one; \"other\": the statuses beyond the 100 with the most orders), from the last scan (every minute).",
			[]string{"status"}, nil),
		age: prometheus.NewDesc("orderwatch_status_oldest_age_seconds",
			"How long the longest-waiting order of the status has been in it, at the scrape: a lower bound (an order first seen in a status counts from its updatedAt then; a status change from the updatedAt that showed it).",
			[]string{"status"}, nil),
		duration: prometheus.NewDesc("orderwatch_status_scan_duration_seconds",
			"How long the last scan of the snapshot for the status metrics took.", nil, nil),
		at: prometheus.NewDesc("orderwatch_status_scan_timestamp_seconds",
			"When the last scan of the snapshot for the status metrics ended (unix time).", nil, nil),
	}
}

// refresh scans the snapshot; on failure the last figures stay (their
// timestamp tells their age).
func (c *dwellCollector) refresh() error {
	start := c.now()
	d, err := c.src.Dwell()
	if err != nil {
		return err
	}
	end := c.now()
	rows := dwellRows(d, MaxStatusLabels)
	c.mu.Lock()
	c.rows, c.scanned, c.took = rows, end, end.Sub(start)
	c.mu.Unlock()
	return nil
}

func (c *dwellCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.orders
	ch <- c.age
	ch <- c.duration
	ch <- c.at
}

func (c *dwellCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	rows, scanned, took := c.rows, c.scanned, c.took
	c.mu.Unlock()
	if scanned.IsZero() {
		return // nothing known yet: no series rather than zeros
	}
	now := c.now()
	for _, r := range rows {
		ch <- prometheus.MustNewConstMetric(c.orders, prometheus.GaugeValue, float64(r.orders), r.status)
		if !r.oldest.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, max(now.Sub(r.oldest).Seconds(), 0), r.status)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.duration, prometheus.GaugeValue, took.Seconds())
	ch <- prometheus.MustNewConstMetric(c.at, prometheus.GaugeValue, float64(scanned.UnixNano())/1e9)
}

// runDwell refreshes the dwell figures at once and then every DwellEvery
// until ctx ends; a failure is logged when it starts and when it ends.
func (w *Watcher) runDwell(ctx context.Context) {
	t := time.NewTicker(DwellEvery)
	defer t.Stop()
	failing := false
	for {
		if err := w.dwell.refresh(); err != nil && !failing {
			failing = true
			w.log.Warn("scanning the snapshot for the status metrics failed; they keep their last figures", "err", err)
		} else if err == nil && failing {
			failing = false
			w.log.Info("scanning the snapshot for the status metrics works again")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
