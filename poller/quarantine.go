package poller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

// Per-order quarantine (BadEntryQuarantine). An entry the service sends
// but the client cannot decode holds back only its own order: it is noted
// in the state file's quarantine, in the same transaction as the slice that
// read it, and the slice is committed with the watermark as if the entry
// had been read. The quarantined orders are retried by id (order search
// with orderId=in:, not an ever-growing window); when an order decodes
// again, there or in a later window, it is diffed against the snapshot
// and its current state is published, and it leaves the quarantine.
//
// An entry whose id cannot be read cannot be quarantined by order: it
// holds the watermark before its slice, as before (ErrBadEntries).

// quarantineIDsPerCall is how many orders one retry call asks for: the
// service's default page size, so that the answer is one page whatever the
// service's cap on itemsPerPage.
const quarantineIDsPerCall = 50

// excerptBytes bounds the raw entry kept in a quarantine record.
const excerptBytes = 300

// quarantineBackoffMax caps the rest of an order whose retries by id keep
// failing (the service answers 404, 403 or 500 for it): the rest doubles
// from QuarantineRetryEvery with each failure in a row, up to this (or
// QuarantineRetryEvery when that is longer).
const quarantineBackoffMax = 30 * time.Minute

// errByIDIgnored: a search by orderId=in: answered with other orders.
var errByIDIgnored = errors.New("the service ignores the filter orderId=in:")

// loadQuarantine reads the quarantined orders at the start of a sweep.
func (s *sweep) loadQuarantine() ([]state.Quarantined, error) {
	qs, err := s.p.store.Quarantine()
	if err != nil {
		return nil, fmt.Errorf("read the quarantine: %w", err)
	}
	known := make(map[int64]bool, len(qs))
	for _, q := range qs {
		known[q.OrderID] = true
	}
	s.p.quarantined = known
	return qs, nil
}

// retryQuarantined asks the service again, by id, for the quarantined
// orders that are due (see due), at most QuarantineCalls calls (the ones
// tried longest ago first). A failed retry does not fail the sweep: the
// orders stay quarantined, each backs off (the rest doubles, see
// quarantineBackoffMax), and the call makes one attempt (plenty.OneAttempt):
// the window is read next, not after the client's retries.
//
// A recheck with a call budget (the probe of late arrivals) retries
// nothing: it spends its calls on its window, and the sweeps retry.
func (s *sweep) retryQuarantined(ctx context.Context) error {
	qs, err := s.loadQuarantine()
	if err != nil {
		return err
	}
	cfg := s.p.cfg
	if cfg.BadEntries != BadEntryQuarantine || len(qs) == 0 || s.p.byIDIgnored || s.maxCalls > 0 {
		return nil
	}
	due := qs[:0]
	now := cfg.Now()
	for _, q := range qs {
		if s.due(q, now) {
			due = append(due, q)
		}
	}
	sortByLastSeen(due)
	for calls := 0; calls < cfg.QuarantineCalls && len(due) > 0; calls++ {
		batch := due[:min(len(due), quarantineIDsPerCall)]
		due = due[len(batch):]
		err := s.retryBatch(ctx, batch)
		switch {
		case err == nil:
		case s.stop.Err() != nil:
			return err
		case errors.Is(err, errByIDIgnored):
			s.p.byIDIgnored = true
			s.p.log.Warn("the service does not accept a search by orderId=in: quarantined orders are no longer retried by id; each leaves the quarantine when a later change of it is read decodable",
				"err", err)
			return s.flush(nil)
		default:
			rest := s.backOff(batch, now)
			s.p.log.Warn("retrying quarantined orders by id failed; they are retried after a rest that doubles with each failure", "orders", len(batch), "rest", rest.String(), "err", err)
			return s.flush(nil)
		}
	}
	return s.flush(nil)
}

// due reports whether a quarantined order is to be retried at now: its
// backoff has passed after a failed retry, else QuarantineRetryEvery has
// since a read found it undecodable. A time in the future beyond any rest
// (the local clock was set back) makes it due.
func (s *sweep) due(q state.Quarantined, now time.Time) bool {
	every := s.p.cfg.QuarantineRetryEvery
	if !q.RetryNotBefore.IsZero() {
		return !now.Before(q.RetryNotBefore) || q.RetryNotBefore.Sub(now) > max(quarantineBackoffMax, every)
	}
	return now.Sub(q.LastSeen) >= every || q.LastSeen.After(now)
}

// backOff notes a failed retry of batch in the pending commit: each order
// rests QuarantineRetryEvery doubled with each failure in a row, capped at
// quarantineBackoffMax. It returns the longest rest.
func (s *sweep) backOff(batch []state.Quarantined, now time.Time) time.Duration {
	every := s.p.cfg.QuarantineRetryEvery
	limit := max(quarantineBackoffMax, every)
	var longest time.Duration
	for _, q := range batch {
		failures := q.RetryFailures + 1
		rest := every
		for i := 1; i < failures && rest < limit; i++ {
			rest *= 2
		}
		rest = min(rest, limit)
		longest = max(longest, rest)
		s.pending.Quarantine = append(s.pending.Quarantine, state.QuarantineOp{
			OrderID: q.OrderID, RetryFailed: &state.RetryFailure{Failures: failures, NotBefore: now.Add(rest)},
		})
	}
	return longest
}

// retryBatch reads the orders of batch by id, diffs the ones that decode
// and notes the ones that still do not.
func (s *sweep) retryBatch(ctx context.Context, batch []state.Quarantined) error {
	if err := s.stop.Err(); err != nil {
		return err
	}
	cfg := s.p.cfg
	ids := make([]order.Value, len(batch))
	want := make(map[int64]bool, len(batch))
	for i, q := range batch {
		ids[i] = order.Int(q.OrderID)
		want[q.OrderID] = true
	}
	filters := append(append(make([]order.Filter, 0, len(cfg.Scope)+1), cfg.Scope...), order.In("orderId", ids...))
	q := order.Query{
		Filters: filters, Complex: cfg.ScopeComplex,
		SortBy: "orderId", SortOrder: "asc",
		ItemsPerPage: max(cfg.ItemsPerPage, len(batch)),
		With:         cfg.With, LazyLoaded: cfg.LazyLoaded,
	}
	page, err := s.p.client.SearchOrders(plenty.OneAttempt(ctx), q)
	if err != nil {
		s.called(0)
		var apiErr *plenty.APIError
		if errors.As(err, &apiErr) && (apiErr.Status == http.StatusBadRequest || apiErr.Status == http.StatusUnprocessableEntity) {
			return fmt.Errorf("%w: %v", errByIDIgnored, err)
		}
		return fmt.Errorf("search %d quarantined orders by id: %w", len(batch), err)
	}
	s.called(len(page.Orders) + len(page.Bad))
	s.st.QuarantineRetries += len(batch)
	s.st.BadEntries += len(page.Bad)
	for _, o := range page.Orders {
		if !want[o.ID] {
			return fmt.Errorf("%w: asked for %d orders, got order %d", errByIDIgnored, len(batch), o.ID)
		}
	}
	for _, b := range page.Bad {
		if id, ok := entryID(b); ok && !want[id] {
			return fmt.Errorf("%w: asked for %d orders, got order %d", errByIDIgnored, len(batch), id)
		}
	}
	if page.TotalsCount > int64(len(batch)) {
		return fmt.Errorf("%w: asked for %d orders, %d match", errByIDIgnored, len(batch), page.TotalsCount)
	}
	// A service that pages below the batch size leaves the rest for the
	// next retry; only a whole answer says that an order is gone.
	whole := page.TotalsCount <= int64(len(page.Orders)+len(page.Bad))
	found := make(map[int64]bool, len(batch))
	for _, b := range page.Bad {
		id, ok := entryID(b)
		if !ok {
			whole = false // one of them, unreadable: none counts as gone
			continue
		}
		found[id] = true
		s.quarantine(b, id)
	}
	// The current state of each order that decodes, diffed as a window's
	// entry would be. Not a late arrival: the sweeps did not miss it, they
	// could not read it.
	mark := s.startMark
	s.startMark = time.Time{}
	defer func() { s.startMark = mark }()
	for i := range page.Orders {
		o := page.Orders[i : i+1]
		found[o[0].ID] = true
		if err := s.add(o, o[0].UpdatedAt.Time); err != nil {
			return err
		}
		s.release(o, "its entry decodes again: its current state is published")
	}
	for _, q := range batch {
		if whole && !found[q.OrderID] {
			// Deleted, or no longer matching the scope: no entry to wait for.
			s.releaseID(q.OrderID, "the service no longer returns the order (deleted?)")
		}
	}
	return nil
}

// noteBad handles a page's undecodable entries by policy and returns how
// many of them hold the watermark before the slice: with skip none, with
// quarantine the ones whose id cannot be read.
func (s *sweep) noteBad(page *order.Page) int {
	s.st.BadEntries += len(page.Bad)
	held := 0
	for _, b := range page.Bad {
		switch id, ok := entryID(b); {
		case s.p.cfg.BadEntries == BadEntrySkip:
			s.p.log.Error("undecodable order entry", "policy", string(s.p.cfg.BadEntries), "err", b.Error())
		case !ok:
			held++
			s.p.log.Error("undecodable order entry without a readable id: it cannot be quarantined by order, the watermark holds before its slice until the service sends it readable",
				"policy", string(s.p.cfg.BadEntries), "err", b.Error())
		default:
			s.quarantine(b, id)
		}
	}
	return held
}

// holdBad keeps the watermark before a slice that holds entries without
// a readable id (they cannot be quarantined by order) and lets the sweep
// read on past it (see hold): the orders after it flow on, the watermark
// waits until the service sends the entries readable, and the sweep ends
// with err (ErrBadEntries) once the window is read.
func (s *sweep) holdBad(at time.Time, err error) {
	s.hold(at, nil)
	if s.unverified == nil {
		s.unverified = err
	}
}

// quarantine notes an undecodable entry of order id in the pending commit,
// and logs when the order enters the quarantine.
func (s *sweep) quarantine(b order.EntryError, id int64) {
	now := s.p.cfg.Now()
	stamp, updatedAt := rawUpdatedAt(b.Raw)
	if !stamp.IsZero() {
		// The service served this stamp: evidence of its clock like any
		// other (poller/clock.go), or a quiet shop's watermark would wait
		// before the quarantined entry.
		s.p.ev.observe(stamp, now)
	}
	q := &state.Quarantined{
		Reason: b.Err.Error(), Excerpt: excerpt(b.Raw), UpdatedAt: updatedAt,
		FirstSeen: now, LastSeen: now, Attempts: 1,
	}
	s.pending.Quarantine = append(s.pending.Quarantine, state.QuarantineOp{OrderID: id, Entry: q})
	if s.p.quarantined == nil {
		s.p.quarantined = map[int64]bool{}
	}
	if s.p.quarantined[id] {
		return
	}
	s.p.quarantined[id] = true
	s.st.QuarantineEntered++
	s.p.log.Error("order entered quarantine: its entry cannot be decoded; the other orders flow on, this one is retried by id until it decodes",
		"order", id, "updated_at", q.UpdatedAt, "err", b.Err, "excerpt", q.Excerpt)
}

// release takes the decoded orders that were quarantined out of the
// quarantine (in the pending commit, with their diffed state).
func (s *sweep) release(orders []order.Order, why string) {
	if len(s.p.quarantined) == 0 {
		return
	}
	for i := range orders {
		s.releaseID(orders[i].ID, why)
	}
}

func (s *sweep) releaseID(id int64, why string) {
	if !s.p.quarantined[id] {
		return
	}
	delete(s.p.quarantined, id)
	s.pending.Quarantine = append(s.pending.Quarantine, state.QuarantineOp{OrderID: id})
	s.st.QuarantineLeft++
	s.p.log.Info("order left quarantine", "order", id, "why", why)
}

// entryID reads the id of an undecodable entry: a positive integer, as a
// number or a numeric string.
func entryID(b order.EntryError) (int64, bool) {
	id, err := strconv.ParseInt(strings.Trim(b.ID, `"`), 10, 64)
	return id, err == nil && id > 0
}

// excerpt is the start of a raw entry, as valid UTF-8.
func excerpt(raw []byte) string {
	s := string(raw)
	if len(s) > excerptBytes {
		s = s[:excerptBytes] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// rawUpdatedAt is the updatedAt of an undecodable entry, and as RFC 3339;
// zero and "" when it cannot be read either.
func rawUpdatedAt(raw []byte) (time.Time, string) {
	var probe struct {
		UpdatedAt order.Time `json:"updatedAt"`
	}
	if json.Unmarshal(raw, &probe) != nil || probe.UpdatedAt.IsZero() {
		return time.Time{}, ""
	}
	return probe.UpdatedAt.Time, probe.UpdatedAt.String()
}

// sortByLastSeen orders quarantined orders for a retry: the one read
// longest ago first, so that a bounded number of calls a sweep reaches
// every one in turn.
func sortByLastSeen(qs []state.Quarantined) {
	slices.SortStableFunc(qs, func(a, b state.Quarantined) int { return a.LastSeen.Compare(b.LastSeen) })
}
