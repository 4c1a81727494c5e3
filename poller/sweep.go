package poller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/state"
)

// Errors a sweep ends with; the watermark stays where it was verified.
var (
	// ErrUnverified: a one-second slice changed during every rescan.
	ErrUnverified = errors.New("slice could not be verified")
	// ErrBadEntries: the slice holds entries that could not be decoded
	// (policy hold).
	ErrBadEntries = errors.New("undecodable entries hold the watermark")
)

// Sweep runs one sweep over [watermark - overlap, server now - settle], in
// verified slices, and returns its figures. On error the figures say how far
// it got; the watermark stays at the last verified slice.
//
// When ctx is cancelled (shutdown), the call in flight is finished (the
// client does not cut it), what was read is committed, no new call is
// started, and Sweep returns ctx's error.
func (p *Poller) Sweep(ctx context.Context) (st Stats, err error) {
	st = Stats{Start: p.cfg.Now(), Events: map[diff.Type]int{}}
	defer func() { st.Duration = p.cfg.Now().Sub(st.Start) }()

	now, err := p.serverNow(ctx, &st)
	if err != nil {
		return st, err
	}
	hi := now.Add(-p.cfg.Settle).Truncate(time.Second)
	meta, err := p.store.Meta()
	if err != nil {
		return st, err
	}
	if meta.Baseline.IsZero() {
		if err := p.store.SetBaseline(hi); err != nil {
			return st, err
		}
		meta.Baseline = hi
		p.log.Info("first sweep: recording the baseline", "from", p.cfg.StartFrom.Format(time.RFC3339), "to", hi.Format(time.RFC3339),
			"events", p.cfg.EmitBaseline)
	}
	lo := p.cfg.StartFrom.Truncate(time.Second)
	if !meta.Watermark.IsZero() {
		lo = meta.Watermark.Add(-p.cfg.Overlap)
	}
	st.Lo, st.Hi, st.Watermark = lo, hi, meta.Watermark
	st.Baseline = lo.Before(meta.Baseline) && !meta.BaselineDone
	defer func() {
		st.WatermarkLag = now.Sub(st.Watermark)
		if st.Watermark.IsZero() {
			st.WatermarkLag = 0
		}
	}()
	if !hi.After(lo) {
		return st, nil
	}
	sw := &sweep{p: p, st: &st, baseline: meta.Baseline, baselineDone: meta.BaselineDone, stop: ctx}
	return st, sw.run(ctx, lo, hi)
}

// serverNow estimates the service's clock. Before the first response of the
// process, one small search call learns it from the Date header.
func (p *Poller) serverNow(ctx context.Context, st *Stats) (time.Time, error) {
	if t, ok := p.client.ServerNow(); ok {
		return t, nil
	}
	q := plenty.Query{Filters: p.cfg.Scope, Complex: p.cfg.ScopeComplex, ItemsPerPage: 1}
	st.Calls++
	if _, err := p.client.SearchOrders(ctx, q); err != nil {
		return time.Time{}, fmt.Errorf("learn the server clock: %w", err)
	}
	t, ok := p.client.ServerNow()
	if !ok {
		return time.Time{}, errors.New("learn the server clock: the service sent no Date header")
	}
	return t, nil
}

// sweep is the state of one sweep.
type sweep struct {
	p            *Poller
	st           *Stats
	baseline     time.Time
	baselineDone bool
	stop         context.Context // cancelled at shutdown: no new page is started

	width time.Duration // the span of the last slice, carried to the next (0: the whole window)
	want  int64         // orders a slice may hold: SlicePages x the envelope's page size

	pending      state.Commit // diffed, not yet committed
	pendingTypes []diff.Type
	ids          []int64
	prev         []*diff.State
}

// run processes [lo, hi] slice by slice, oldest first, so that the
// watermark moves forward monotonically.
func (s *sweep) run(ctx context.Context, lo, hi time.Time) error {
	cur := lo
	for {
		end := hi
		if !s.baselineDone && cur.Before(s.baseline) && s.baseline.Before(end) {
			end = s.baseline // the baseline's records stay silent, the rest does not
		}
		if s.width > 0 && cur.Add(s.width).Before(end) {
			end = cur.Add(s.width)
		}
		done, total, err := s.slice(ctx, cur, end)
		if err != nil {
			return err
		}
		if !done.Before(hi) {
			return nil
		}
		// The next slice starts as wide as this one, twice as wide when this
		// one was less than half full: no call is spent probing the whole
		// rest of a large window again.
		s.width = max(done.Sub(cur), time.Second)
		if 2*total < s.want {
			s.width *= 2
		}
		// The next slice starts at the second this one ended in (entries of
		// that second diff to nothing), or after it when the slice was a
		// single second.
		if done.Equal(cur) {
			cur = done.Add(time.Second)
		} else {
			cur = done
		}
	}
}

// slice verifies and commits [lo, hi] or a shorter slice [lo, cut] when the
// window holds too many orders; it returns the upper bound it verified.
// The total is the number of orders the verified slice held.
func (s *sweep) slice(ctx context.Context, lo, hi time.Time) (time.Time, int64, error) {
	cfg := s.p.cfg
	rescans := 0
	for {
		first, err := s.fetch(ctx, lo, hi, 1, 0)
		if err != nil {
			return lo, 0, err
		}
		ipp := max(first.ItemsPerPage, 1)
		s.want = int64(cfg.SlicePages) * ipp
		pages := (first.TotalsCount + ipp - 1) / ipp
		if pages > int64(cfg.SlicePages) && hi.Sub(lo) >= time.Second {
			hi = cut(lo, hi, first, s.want)
			continue
		}
		if pages > int64(cfg.SlicePages) && cfg.Keyset {
			return hi, first.TotalsCount, s.keyset(ctx, lo, hi, first)
		}
		ok, err := s.scan(ctx, lo, hi, first)
		if err != nil {
			return lo, 0, err
		}
		if ok {
			return hi, first.TotalsCount, nil
		}
		// What the failed scan diffed is true (each entry is a state the
		// order had): commit it, so that the rescan diffs against it.
		if err := s.flush(nil); err != nil {
			return lo, 0, err
		}
		s.st.Rescans++
		rescans++
		if rescans < cfg.MaxRescans {
			continue
		}
		if hi.Sub(lo) >= time.Second {
			hi = lo.Add((hi.Sub(lo) / 2).Truncate(time.Second))
			rescans = 0
			continue
		}
		if cfg.Keyset {
			return hi, 0, s.keyset(ctx, lo, hi, nil)
		}
		return lo, 0, fmt.Errorf("%w: %s changed during %d scans", ErrUnverified, lo.Format(time.RFC3339), rescans)
	}
}

// scan pages through [lo, hi] by offset and verifies it. Every page that
// passes the checks so far is diffed and committed; the last one commits the
// watermark too. ok is false when the result set changed during the scan.
func (s *sweep) scan(ctx context.Context, lo, hi time.Time, first *plenty.Page) (ok bool, err error) {
	total := first.TotalsCount
	ipp := max(first.ItemsPerPage, 1)
	last := max((total+ipp-1)/ipp, 1)
	var lastID int64
	var seen int64
	bad := 0
	page := first
	for n := int64(1); ; n++ {
		if n > 1 {
			if page, err = s.fetch(ctx, lo, hi, int(n), 0); err != nil {
				return false, err
			}
		}
		if page.TotalsCount != total || page.ItemsPerPage != first.ItemsPerPage || (page.Page != 0 && page.Page != n) {
			return false, nil
		}
		if lastID, ok = increasing(page.Orders, lastID); !ok {
			return false, nil
		}
		seen += int64(len(page.Orders) + len(page.Bad))
		bad += s.noteBad(page)
		final := n >= last
		if final && seen != total {
			return false, nil
		}
		if err := s.add(page.Orders, hi); err != nil {
			return false, err
		}
		if !final {
			if len(s.pending.Events) >= flushAt {
				if err := s.flush(nil); err != nil {
					return false, err
				}
			}
			continue
		}
		var mark *time.Time
		if bad == 0 || s.p.cfg.BadEntries == BadEntrySkip {
			mark = &hi
		}
		if err := s.flush(mark); err != nil {
			return false, err
		}
		if mark == nil {
			return false, fmt.Errorf("%w: %d in %s..%s", ErrBadEntries, bad, lo.Format(time.RFC3339), hi.Format(time.RFC3339))
		}
		s.st.Slices++
		return true, nil
	}
}

// keyset pages through [lo, hi] with orderId=gt:<last id>: inside a window
// in the past no order can enter, so every order present throughout is
// returned, and one that left shows its newer state in a later window.
func (s *sweep) keyset(ctx context.Context, lo, hi time.Time, page *plenty.Page) error {
	var lastID int64
	bad := 0
	for {
		if page == nil {
			var err error
			if page, err = s.fetch(ctx, lo, hi, 1, lastID); err != nil {
				return err
			}
		}
		next, ok := increasing(page.Orders, lastID)
		if !ok {
			return fmt.Errorf("%w: keyset page not in ascending id order", ErrUnverified)
		}
		bad += s.noteBad(page)
		// With orderId=gt:, totalsCount counts what is left.
		n := int64(len(page.Orders) + len(page.Bad))
		final := page.IsLastPage || n >= page.TotalsCount || n == 0
		if !final && len(page.Bad) > 0 && page.Bad[len(page.Bad)-1].Index == int(n)-1 {
			// The page ends in an unreadable entry: page on past its id.
			id, err := strconv.ParseInt(strings.Trim(page.Bad[len(page.Bad)-1].ID, `"`), 10, 64)
			if err != nil || id <= next {
				return fmt.Errorf("%w: keyset paging cannot pass an entry without a readable id", ErrBadEntries)
			}
			next = id
		}
		if err := s.add(page.Orders, hi); err != nil {
			return err
		}
		if !final {
			if len(s.pending.Events) >= flushAt {
				if err := s.flush(nil); err != nil {
					return err
				}
			}
			lastID, page = next, nil
			continue
		}
		var mark *time.Time
		if bad == 0 || s.p.cfg.BadEntries == BadEntrySkip {
			mark = &hi
		}
		if err := s.flush(mark); err != nil {
			return err
		}
		if mark == nil {
			return fmt.Errorf("%w: %d in %s..%s", ErrBadEntries, bad, lo.Format(time.RFC3339), hi.Format(time.RFC3339))
		}
		s.st.Slices++
		return nil
	}
}

// increasing checks that ids rise strictly from after; it returns the last id.
func increasing(orders []plenty.Order, after int64) (int64, bool) {
	for _, o := range orders {
		if o.ID <= after {
			return after, false
		}
		after = o.ID
	}
	return after, true
}

func (s *sweep) noteBad(page *plenty.Page) int {
	for _, b := range page.Bad {
		s.p.log.Error("undecodable order entry", "policy", string(s.p.cfg.BadEntries), "err", b.Error())
	}
	s.st.BadEntries += len(page.Bad)
	return len(page.Bad)
}

// fetch reads one page of the window; afterID > 0 adds the keyset filter.
func (s *sweep) fetch(ctx context.Context, lo, hi time.Time, page int, afterID int64) (*plenty.Page, error) {
	if err := s.stop.Err(); err != nil {
		// Shutdown: keep what was read (without moving the watermark).
		if ferr := s.flush(nil); ferr != nil {
			s.p.log.Warn("commit at shutdown failed; the next start reads it again", "err", ferr)
		}
		return nil, err
	}
	cfg := s.p.cfg
	filters := append(make([]plenty.Filter, 0, len(cfg.Scope)+2), cfg.Scope...)
	filters = append(filters, plenty.Between("updatedAt", plenty.At(lo), plenty.At(hi)))
	if afterID > 0 {
		filters = append(filters, plenty.Gt("orderId", plenty.Int(afterID)))
	}
	q := plenty.Query{
		Filters: filters, Complex: cfg.ScopeComplex,
		SortBy: "orderId", SortOrder: "asc",
		Page: page, ItemsPerPage: cfg.ItemsPerPage,
		With: cfg.With, LazyLoaded: cfg.LazyLoaded,
	}
	s.st.Calls++
	p, err := s.p.client.SearchOrders(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("sweep %s..%s page %d: %w", lo.Format(time.RFC3339), hi.Format(time.RFC3339), page, err)
	}
	s.st.Pages++
	s.st.Orders += len(p.Orders) + len(p.Bad)
	return p, nil
}

// add diffs a page against the snapshot and adds the changed states and
// their events to the pending commit. The ids of one scan rise strictly, so
// no order is twice in a pending commit.
func (s *sweep) add(orders []plenty.Order, sliceHi time.Time) error {
	cfg := s.p.cfg
	opt := diff.Options{
		Baseline:     s.baseline,
		InBaseline:   !s.baselineDone && !sliceHi.After(s.baseline),
		EmitBaseline: cfg.EmitBaseline,
		EmitUpdated:  cfg.EmitUpdated,
		Scope:        cfg.ScopeLocal,
	}
	ids := s.ids[:0]
	for _, o := range orders {
		ids = append(ids, o.ID)
	}
	s.ids = ids
	prev := s.prev[:0]
	prev = append(prev, make([]*diff.State, len(orders))...)
	s.prev = prev
	if err := s.p.store.Lookup(ids, prev); err != nil {
		return err
	}
	for i, o := range orders {
		next, store, events := diff.Decide(prev[i], o, opt)
		if store {
			s.pending.States = append(s.pending.States, state.Put{ID: o.ID, State: next})
		}
		for _, e := range events {
			s.pendingTypes = append(s.pendingTypes, e.Type)
			s.pending.Events = append(s.pending.Events, state.OutboxEntry{
				ID: e.ID, Subject: e.Subject(cfg.SubjectPrefix), Payload: diff.Encode(nil, e, cfg.Source),
			})
		}
	}
	return nil
}

// flush writes the pending states and events in one transaction, with the
// watermark when mark is set (the slice is verified). A transaction per
// slice rather than per page: a crash redoes at most one slice, and the
// sweep pays one fsync per slice.
func (s *sweep) flush(mark *time.Time) error {
	cfg := s.p.cfg
	c := s.pending
	if mark != nil {
		c.Watermark = mark
		now := cfg.Now()
		c.LastSweep = &now
		c.BaselineDone = !mark.Before(s.baseline)
	}
	if len(c.States) == 0 && len(c.Events) == 0 && mark == nil {
		return nil
	}
	// A full outbox, or a state file that cannot be written (disk full,
	// read-only), pauses the sweep with what it read in memory: the same
	// commit is tried again until it is stored, and no call is made to the
	// service meanwhile (a failed sweep would read it all again).
	waited := false
	for {
		err := s.p.store.Commit(c)
		if err == nil {
			break
		}
		full := errors.Is(err, state.ErrOutboxFull)
		if !full && !errors.Is(err, state.ErrNotWritable) {
			return fmt.Errorf("commit: %w", err)
		}
		if !waited {
			waited = true
			if full {
				s.st.OutboxWaits++
				s.p.log.Warn("outbox full: sweep paused until the publisher drains it", "err", err)
			} else {
				s.st.StateWaits++ // the state file's owner logs the failure
			}
		}
		if err := cfg.Sleep(s.stop, cfg.OutboxWait); err != nil {
			return fmt.Errorf("commit: %w (stopped while waiting)", err)
		}
	}
	for _, t := range s.pendingTypes {
		s.st.Events[t]++
	}
	if cfg.OnCommit != nil && len(c.Events) > 0 {
		cfg.OnCommit(len(c.Events))
	}
	if mark != nil {
		s.st.Watermark = *mark
	}
	s.pending = state.Commit{States: c.States[:0], Events: c.Events[:0]}
	s.pendingTypes = s.pendingTypes[:0]
	return nil
}

// flushAt bounds a pending commit: past this many events it is written
// before the slice ends (keyset slices can be long).
const flushAt = 5000

// cut picks the end of a shorter slice [lo, cut] expected to hold about want
// of the window's orders: in proportion to time, assuming changes spread
// evenly (a cut still too large is cut again). When most of the first page
// shares one second, that second holds a bulk change: the cut lies just
// before it, so the bulk second becomes a slice of its own. The first page
// is the window's lowest ids, not a fair sample of its times, so it is used
// only for that. The result is in [lo, hi-1s].
func cut(lo, hi time.Time, first *plenty.Page, want int64) time.Time {
	c := lo.Add(time.Duration(float64(hi.Sub(lo)) * float64(want) / float64(first.TotalsCount)))
	if len(first.Orders) >= 10 {
		counts := map[int64]int{}
		for _, o := range first.Orders {
			counts[o.UpdatedAt.Unix()]++
		}
		for sec, n := range counts {
			if at := time.Unix(sec, 0); 10*n >= 9*len(first.Orders) && !at.Before(lo) && !at.After(hi) {
				c = at.Add(-time.Second)
			}
		}
	}
	c = c.Truncate(time.Second)
	if c.Before(lo) {
		c = lo
	}
	if last := hi.Add(-time.Second); c.After(last) {
		c = last
	}
	return c
}
