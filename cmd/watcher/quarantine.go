package main

import (
	"fmt"
	"io"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// quarantined is the gauge orderwatch_quarantined_orders: -1 when the
// state file cannot be read.
func (d *daemon) quarantined() int {
	n, err := d.store.QuarantineCount()
	if err != nil {
		return -1
	}
	return n
}

// quarantineReport is the state report's list of quarantined orders, as
// stored: the raw reason, an excerpt of the entry, when it was first and
// last seen undecodable and how often. Never nil (an empty list in JSON).
func quarantineReport(s *state.Store) ([]state.Quarantined, error) {
	qs, err := s.Quarantine()
	if qs == nil {
		qs = []state.Quarantined{}
	}
	return qs, err
}

// printQuarantine prints the quarantined orders of the text report.
func printQuarantine(w io.Writer, qs []state.Quarantined, now time.Time) {
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
