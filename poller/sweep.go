package poller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

// Errors a sweep ends with; the watermark stays where it was verified.
var (
	// ErrUnverified: a one-second slice changed during every rescan.
	ErrUnverified = errors.New("slice could not be verified")
	// ErrBadEntries: the slice holds entries that could not be decoded and
	// whose id cannot be read either, so that they cannot be quarantined by
	// order (see quarantine.go).
	ErrBadEntries = errors.New("undecodable entries hold the watermark")
	// ErrClock: the window is empty (hi <= lo): a clock is wrong. Never a
	// verified sweep.
	ErrClock = errors.New("clock problem")
)

// Sweep runs one sweep over [watermark - overlap, server now - settle], in
// verified slices, and returns its figures. Server now is a hint from the
// Date header (see window); the watermark never passes the newest
// updatedAt the service has served, carried forward on the local monotonic
// clock, minus settle (see bounded). On error the figures say how far it
// got; the watermark stays at the last verified slice.
//
// When ctx is cancelled (shutdown), the call in flight is finished (the
// client does not cut it), what was read is committed, no new call is
// started, and Sweep returns ctx's error.
func (p *Poller) Sweep(ctx context.Context) (st Stats, err error) {
	st = Stats{Start: p.cfg.Now(), Events: map[diff.Type]int{}}
	defer func() { st.Duration = p.cfg.Now().Sub(st.Start) }()
	sw := &sweep{p: p, st: &st, stop: ctx}

	now, err := p.serverNow(ctx, sw)
	if err != nil {
		return st, err
	}
	p.loadClock(now)
	meta, err := p.store.Meta()
	if err != nil {
		return st, err
	}
	p.loadReads(meta)
	date := p.latestDate(now)
	hi := p.window(date)
	if err := p.recordBaseline(ctx, &meta, hi); err != nil {
		return st, err
	}
	if meta.Watermark.After(hi) {
		// The watermark is never ahead of server time minus settle: a clock
		// put it there (a Date header or a local clock that jumped ahead).
		// Changes below it may be unread: read them again (idempotent).
		if err := p.store.RewindWatermark(hi); err != nil {
			return st, fmt.Errorf("rewind the watermark: %w", err)
		}
		p.log.Error("the watermark is ahead of server time minus settle (a clock jumped): rewound, the window is read again",
			"watermark", meta.Watermark.Format(time.RFC3339), "rewound_to", hi.Format(time.RFC3339), "server_now", now.Format(time.RFC3339))
		st.Rewound = meta.Watermark
		p.rewound(meta.Watermark, hi)
		meta.Watermark = hi
	}
	lo := p.syncFrom(meta)
	if !meta.Watermark.IsZero() {
		lo = p.sweepFrom(meta.Watermark, st.Rewound.IsZero())
	}
	if meta.BaselineDone && date.Add(-p.cfg.Settle).Before(lo) && hi.After(date.Add(-p.cfg.Settle)) {
		// The Date says the service's clock lies below the window: a Date
		// behind, or a clock set back whose new stamps land below the
		// watermark. The stamps decide.
		back, err := sw.probeBack(ctx, date, date.Add(-p.cfg.Settle).Truncate(time.Second), meta.Watermark)
		if err != nil {
			return st, err
		}
		if !back.IsZero() {
			st.Rewound = meta.Watermark
			p.rewound(meta.Watermark, back)
			meta.Watermark = back
			lo = back.Add(-p.cfg.Overlap)
			hi = p.window(date)
		}
	}
	if meta.BaselineDone && st.Rewound.IsZero() {
		hi = p.fits(lo, hi, meta.Watermark)
	}
	st.Lo, st.Hi, st.Watermark = lo, hi, meta.Watermark
	st.Baseline = lo.Before(meta.Baseline) && !meta.BaselineDone
	defer func() {
		st.WatermarkLag = now.Sub(st.Watermark)
		if st.Watermark.IsZero() {
			st.WatermarkLag = now.Sub(p.cfg.StartFrom)
		}
	}()
	if !hi.After(lo) {
		return st, fmt.Errorf("%w: the window is empty: server time minus settle (%s) is not after its start (%s); the start point (WATCHER_START_FROM) or the watermark lies ahead of the service's clock",
			ErrClock, hi.Format(time.RFC3339), lo.Format(time.RFC3339))
	}
	sw.baseline, sw.baselineDone, sw.startMark, sw.lateFrom = meta.Baseline, meta.BaselineDone, meta.Watermark, p.covered
	sw.ref = meta.Watermark
	if !meta.Watermark.IsZero() && lo.Before(meta.Watermark.Add(-p.cfg.Overlap)) {
		sw.lookBelow = meta.Watermark.Add(-p.cfg.Overlap) // sweepFrom read down to what the ledger owes
	}
	sw.lo, sw.hi, sw.pos = lo, hi, lo
	return st, sw.run(ctx, lo, hi)
}

// syncFrom is where a sweep without a watermark reads from: where the
// first sync began when it is recorded (a takeover inside a first sync
// another process began, a restart inside this file's), not this
// process's own start (now - 24 h is later: what lies between would be
// read by nobody).
func (p *Poller) syncFrom(meta state.Meta) time.Time {
	if !meta.SyncStart.IsZero() {
		return meta.SyncStart.Truncate(time.Second)
	}
	return p.cfg.StartFrom.Truncate(time.Second)
}

// fits is where a sweep of [lo, hi] from the watermark ends: at hi, or,
// when the window is over a page's worth at the measured density by a
// sliver (half a page or less: not a catch-up), where a page's worth
// ends, so that the sweep takes one call rather than a second one for the
// sliver; the next sweep reads it. A sweep that costs two calls paces the
// next ones twice as far apart, whose windows then fill two pages: a busy
// shop stays there at the same calls (docs/benchmarks.md, the read
// ledger). Never at or below the watermark.
func (p *Poller) fits(lo, hi, watermark time.Time) time.Time {
	s := p.pageSpan
	if s <= 0 || hi.Sub(lo) < s || hi.Sub(lo) > s*3/2 {
		return hi
	}
	// The density is measured over hi - lo, one second short of what a
	// window reads (both ends' seconds): lo + s holds about a page's fill.
	if end := lo.Add(s).Truncate(time.Second); end.After(watermark) {
		return end
	}
	return hi
}

// recordBaseline sets the first sync's baseline at hi when the state file
// has none, and tells the group (tellBaseline).
func (p *Poller) recordBaseline(ctx context.Context, meta *state.Meta, hi time.Time) error {
	if meta.Baseline.IsZero() {
		if err := p.store.SetBaselineFrom(p.cfg.StartFrom.Truncate(time.Second), hi); err != nil {
			return err
		}
		meta.Baseline = hi
		p.log.Info("first sweep: recording the baseline", "from", p.cfg.StartFrom.Format(time.RFC3339), "to", hi.Format(time.RFC3339),
			"events", p.cfg.EmitBaseline)
	}
	return p.tellBaseline(ctx, *meta)
}

// tellBaseline gives the first sync's baseline to OnBaseline before the
// sync reads anything (no watermark yet), once per poller.
func (p *Poller) tellBaseline(ctx context.Context, meta state.Meta) error {
	if meta.BaselineDone || !meta.Watermark.IsZero() || p.baselineTold || p.cfg.OnBaseline == nil {
		return nil
	}
	if err := p.cfg.OnBaseline(ctx, meta.Baseline); err != nil {
		return fmt.Errorf("the group does not know the baseline yet: %w", err)
	}
	p.baselineTold = true
	return nil
}

// serverNow estimates the service's clock. Before the first response of the
// process, one small search call learns it from the Date header.
func (p *Poller) serverNow(ctx context.Context, sw *sweep) (time.Time, error) {
	if t, ok := p.client.ServerNow(); ok {
		return t, nil
	}
	q := order.Query{Filters: p.cfg.Scope, Complex: p.cfg.ScopeComplex, ItemsPerPage: 1}
	_, err := p.client.SearchOrders(ctx, q)
	sw.called(0)
	if err != nil {
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
	startMark    time.Time       // the watermark the sweep started from
	lateFrom     time.Time       // Poller.covered when the sweep started (zero: nothing is measured late)
	lo, hi, pos  time.Time       // the window; pos: verified up to here

	// held: a slice before the current one is not verified (yet): the
	// slices after it are read and committed without the watermark.
	held       bool
	unverified error // why, when it is an error of the sweep

	// maxCalls > 0 ends the window after the slice that reached it (a
	// recheck, recheck.go); stopped is where the rest begins.
	maxCalls int
	stopped  time.Time

	reported struct{ calls, orders int } // figures of the last progress report

	width time.Duration // the span of the last slice, carried to the next (0: the whole window)
	want  int64         // orders a slice may hold: SlicePages x the envelope's page size

	// The read ledger (reads.go): ref is the watermark when the read
	// began; claim the verified read the next flush records. A recheck pages a bulk second with its own
	// cursor (Poller.rebulk), continued only where it began at an age of
	// need or more.
	ref       time.Time
	claim     *claim
	lookBelow time.Time // below it the sweep reads what a second look would (sweepFrom)
	recheck   bool
	need      time.Duration

	pending      state.Commit // diffed, not yet committed
	pendingTypes []diff.Type
	ids          []int64
	prev         []*diff.State
}

// run processes [lo, hi] slice by slice, oldest first, so that the
// watermark moves forward monotonically.
func (s *sweep) run(ctx context.Context, lo, hi time.Time) error {
	if err := s.retryQuarantined(ctx); err != nil {
		return err
	}
	cur := lo
	for {
		if s.maxCalls > 0 && s.st.Calls >= s.maxCalls {
			s.stopped = cur
			return s.unverified
		}
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
		s.st.Entries += int(total)
		if !done.Before(hi) {
			return s.unverified
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
		s.p.page = ipp
		s.want = int64(cfg.SlicePages) * ipp
		pages := (first.TotalsCount + ipp - 1) / ipp
		if pages > int64(cfg.SlicePages) && hi.Sub(lo) >= time.Second {
			hi = cut(lo, hi, first, s.want)
			continue
		}
		if pages > int64(cfg.SlicePages) && s.keysetOK() {
			err := s.bulk(ctx, lo, hi, first)
			if errors.Is(err, errKeysetIgnored) {
				continue // by offset, as if keyset were off
			}
			return hi, first.TotalsCount, err
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
		if s.keysetOK() {
			err := s.bulk(ctx, lo, hi, nil)
			if errors.Is(err, errKeysetIgnored) {
				s.hold(lo, fmt.Errorf("%w: %s changed during every rescan and the service ignores orderId=gt:", ErrUnverified, lo.Format(time.RFC3339)))
				err = nil
			}
			return hi, 0, err
		}
		s.hold(lo, fmt.Errorf("%w: %s changed during %d scans", ErrUnverified, lo.Format(time.RFC3339), rescans))
		return hi, 0, nil
	}
}

// keysetOK says whether a bulk second is paged by keyset.
func (s *sweep) keysetOK() bool {
	switch s.p.cfg.Keyset {
	case KeysetOn:
		return true
	case KeysetAuto:
		return !s.p.keysetIgnored
	}
	return false
}

// hold keeps the watermark before the second at (not verified in this
// sweep) and lets the sweep go on past it: the slices after it are read and
// their changes committed, so that one busy second holds back no other
// order; the watermark waits until the second is verified. err, when set,
// ends the sweep as failed once the window is read.
func (s *sweep) hold(at time.Time, err error) {
	if !s.held {
		s.held = true
		s.st.Held = at
		if err != nil {
			s.p.log.Warn("a bulk second cannot be verified in this sweep: the watermark waits before it, the orders after it are read and published meanwhile",
				"second", at.Format(time.RFC3339), "err", err)
		}
	}
	if s.unverified == nil {
		s.unverified = err
	}
}

// bulk reads one second holding more orders than offset paging can verify,
// by keyset, KeysetPages pages a sweep at most: a longer one is continued
// by the next sweep from where this one stopped (inside a second in the
// past no order can enter, so the cursor stays valid), and the sweep goes
// on past it meanwhile (see hold).
func (s *sweep) bulk(ctx context.Context, lo, hi time.Time, first *order.Page) error {
	cur := &s.p.bulk
	if s.recheck {
		cur = &s.p.rebulk
	}
	after, ref := int64(0), s.ref
	s.p.loadCursors()
	if c := *cur; c.at.Equal(lo) && c.after > 0 && (!s.recheck || c.ref.Sub(lo) >= s.need) {
		after, first, ref = c.after, nil, c.ref
	}
	if s.held && !s.recheck {
		// Already held before this second: read it for its changes, the
		// watermark cannot pass it anyway.
		after, first, ref = 0, nil, s.ref
	}
	s.st.KeysetSlices++
	last, done, err := s.keyset(ctx, lo, hi, first, after, ref)
	if errors.Is(err, errKeysetIgnored) {
		// What was read is true; the rest is read by offset.
		s.p.keysetIgnored = true
		*cur = bulkCursor{}
		s.p.log.Warn("the service ignores the filter orderId=gt: (keyset paging): falling back to offset paging; a bulk second that changes during every rescan waits until it is quiet, the orders after it are read meanwhile",
			"second", lo.Format(time.RFC3339))
		if ferr := s.flushCursors(); ferr != nil {
			return ferr
		}
		return err
	}
	if err != nil {
		return err
	}
	if done {
		if cur.at.Equal(lo) {
			*cur = bulkCursor{}
			return s.flushCursors()
		}
		return nil
	}
	if !s.held || s.recheck {
		// Continued by the next sweep (or recheck) from here; the second
		// is recorded read only once the cursor gets to its end. The
		// cursor is saved with the events of the orders it passed
		// (bulkcursor.go): a restart goes on from it.
		*cur = bulkCursor{at: lo, after: last, ref: ref}
		if err := s.flushCursors(); err != nil {
			return err
		}
	}
	if !s.held {
		s.p.log.Info("a bulk second is read by keyset over several sweeps: the watermark waits before it, the orders after it are read and published meanwhile",
			"second", lo.Format(time.RFC3339), "after_id", last, "pages_per_sweep", s.p.cfg.KeysetPages)
	}
	s.hold(lo, nil)
	return nil
}

// scan pages through [lo, hi] by offset and verifies it. Every page that
// passes the checks so far is diffed and committed; the last one commits the
// watermark too. ok is false when the result set changed during the scan
// and the scan could not go on past what it had read for sure (see
// scanRange and keysetRest): the caller rescans the slice.
//
// A scan that fails verification goes on where it stopped being sure, not
// at the start: the full pages read before the set changed were the lowest
// ids of the slice as it was when they were read (no order can enter a
// window in the past, so an unchanged totalsCount means an unchanged set),
// so every order of the slice up to the last of them was read. The rest,
// the ids above it, is read by keyset (orderId=gt:), which needs no stable
// set: each failed verification costs the one page that showed it, and a
// slice that changes on every other page is still read once. Without
// keyset paging (off, or the service ignores the filter) the slice is
// rescanned whole.
func (s *sweep) scan(ctx context.Context, lo, hi time.Time, first *order.Page) (ok bool, err error) {
	bad := 0
	done, upto, err := s.scanRange(ctx, lo, hi, first, &bad)
	if err != nil {
		return false, err
	}
	if !done {
		if !s.keysetOK() {
			return false, nil
		}
		// What the failed scan diffed is true: commit it, and read on from
		// the first id not read for sure.
		if err := s.flush(nil); err != nil {
			return false, err
		}
		s.st.Rescans++
		if done, err = s.keysetRest(ctx, lo, hi, upto, &bad); err != nil || !done {
			return false, err
		}
	}
	var mark *time.Time
	if bad == 0 {
		mark = &hi
		s.claim = &claim{lo: lo, hi: hi, ref: s.ref}
	}
	if err := s.flush(mark); err != nil {
		return false, err
	}
	if mark == nil {
		s.holdBad(lo, fmt.Errorf("%w: %d in %s..%s", ErrBadEntries, bad, lo.Format(time.RFC3339), hi.Format(time.RFC3339)))
		return true, nil
	}
	s.st.Slices++
	return true, nil
}

// keysetRest reads the orders of [lo, hi] with ids above after by keyset,
// to the end: inside a window in the past no order can enter, so each page
// holds the lowest ids above the cursor of a set that only shrinks, every
// order present throughout is read, and one that left shows its newer
// state in a later window (as in keyset). done is false when the service
// ignores the filter (KeysetAuto then stops using it) or the pages cannot
// be followed (ids not ascending, an unreadable id ending a page): the
// slice is rescanned by offset.
func (s *sweep) keysetRest(ctx context.Context, lo, hi time.Time, after int64, bad *int) (done bool, err error) {
	for {
		page, err := s.fetch(ctx, lo, hi, 1, after)
		if err != nil {
			return false, err
		}
		next, ok := increasing(page.Orders, after)
		if !ok {
			if after > 0 && len(page.Orders) > 0 && page.Orders[0].ID <= after && s.p.cfg.Keyset == KeysetAuto {
				s.p.keysetIgnored = true
				s.p.log.Warn("the service ignores the filter orderId=gt: (keyset paging): a scan that fails verification is rescanned whole",
					"slice", lo.Format(time.RFC3339))
			}
			return false, nil
		}
		n := int64(len(page.Orders) + len(page.Bad))
		final := page.IsLastPage || n >= page.TotalsCount || n == 0
		if !final && len(page.Bad) > 0 && page.Bad[len(page.Bad)-1].Index == int(n)-1 {
			// The page ends in an unreadable entry: page on past its id.
			id, ok := entryID(page.Bad[len(page.Bad)-1])
			if !ok || id <= next {
				return false, nil
			}
			next = id
		}
		*bad += s.noteBad(page)
		if err := s.add(page.Orders, hi); err != nil {
			return false, err
		}
		s.release(page.Orders, "its entry decodes again in a sweep")
		if final {
			return true, nil
		}
		after = next
		if len(s.pending.Events) >= flushAt {
			if err := s.flush(nil); err != nil {
				return false, err
			}
		}
	}
}

// scanRange pages by offset through the orders of [lo, hi], starting with
// page 1, and verifies them: totalsCount the same on every page, ids
// rising strictly, as many entries as totalsCount. Every page that passes
// the checks so far is diffed into the pending commit; bad counts the
// entries that hold the watermark. done says the slice is verified; when it
// is not, upto is the id up to which it was read for sure: the last id of
// the last full page before the set changed (0: none).
func (s *sweep) scanRange(ctx context.Context, lo, hi time.Time, first *order.Page, bad *int) (done bool, upto int64, err error) {
	total := first.TotalsCount
	ipp := max(first.ItemsPerPage, 1)
	last := max((total+ipp-1)/ipp, 1)
	var lastID, seen int64
	page := first
	for n := int64(1); ; n++ {
		if n > 1 {
			if page, err = s.fetch(ctx, lo, hi, int(n), 0); err != nil {
				return false, upto, err
			}
		}
		if page.TotalsCount != total || page.ItemsPerPage != first.ItemsPerPage || (page.Page != 0 && page.Page != n) {
			return false, upto, nil
		}
		next, ok := increasing(page.Orders, lastID)
		if !ok {
			return false, upto, nil
		}
		entries := int64(len(page.Orders) + len(page.Bad))
		seen += entries
		final := n >= last
		if final && seen != total {
			return false, upto, nil
		}
		*bad += s.noteBad(page)
		if err := s.add(page.Orders, hi); err != nil {
			return false, upto, err
		}
		s.release(page.Orders, "its entry decodes again in a sweep")
		if final {
			return true, upto, nil
		}
		lastID = next
		if entries == ipp {
			// A full page of an unchanged set: every order of the slice
			// up to its last entry is read. An unreadable last entry with
			// a readable id counts as read (it is noted).
			upto = next
			if len(page.Bad) > 0 && page.Bad[len(page.Bad)-1].Index == int(entries)-1 {
				if id, ok := entryID(page.Bad[len(page.Bad)-1]); ok && id > upto {
					upto = id
				}
			}
		}
		if len(s.pending.Events) >= flushAt {
			if err := s.flush(nil); err != nil {
				return false, upto, err
			}
		}
	}
}

// errKeysetIgnored: a keyset page held ids at or below the cursor.
var errKeysetIgnored = errors.New("the service ignores orderId=gt:")

// keyset pages through [lo, hi] with orderId=gt:<last id>, starting after
// the id after (0: from the start; page is the first page when given):
// inside a window in the past no order can enter, so every order present
// throughout is returned, and one that left shows its newer state in a
// later window. It stops after KeysetPages pages; done says whether it got
// to the end (the slice is verified and committed), last is the cursor.
// ref is the service's clock when the paging of the second began: the
// second is recorded read as of then (a late commit that entered it below
// the cursor since is not claimed).
func (s *sweep) keyset(ctx context.Context, lo, hi time.Time, page *order.Page, after int64, ref time.Time) (last int64, done bool, err error) {
	lastID := after
	bad := 0
	for pages := 0; ; pages++ {
		if page == nil {
			if pages >= s.p.cfg.KeysetPages {
				return lastID, false, s.flush(nil)
			}
			if page, err = s.fetch(ctx, lo, hi, 1, lastID); err != nil {
				return lastID, false, err
			}
		}
		next, ok := increasing(page.Orders, lastID)
		if !ok {
			if lastID > 0 && len(page.Orders) > 0 && page.Orders[0].ID <= lastID {
				if s.p.cfg.Keyset == KeysetAuto {
					return lastID, false, errKeysetIgnored
				}
				return lastID, false, fmt.Errorf("%w: keyset page starts at id %d, not after %d: the service ignores orderId=gt: (use WATCHER_KEYSET=auto or false)",
					ErrUnverified, page.Orders[0].ID, lastID)
			}
			return lastID, false, fmt.Errorf("%w: keyset page not in ascending id order", ErrUnverified)
		}
		bad += s.noteBad(page)
		// With orderId=gt:, totalsCount counts what is left.
		n := int64(len(page.Orders) + len(page.Bad))
		final := page.IsLastPage || n >= page.TotalsCount || n == 0
		if !final && len(page.Bad) > 0 && page.Bad[len(page.Bad)-1].Index == int(n)-1 {
			// The page ends in an unreadable entry: page on past its id.
			id, ok := entryID(page.Bad[len(page.Bad)-1])
			if !ok || id <= next {
				return lastID, false, fmt.Errorf("%w: keyset paging cannot pass an entry without a readable id", ErrBadEntries)
			}
			next = id
		}
		if err := s.add(page.Orders, hi); err != nil {
			return lastID, false, err
		}
		s.release(page.Orders, "its entry decodes again in a sweep")
		if !final {
			if len(s.pending.Events) >= flushAt {
				if err := s.flush(nil); err != nil {
					return lastID, false, err
				}
			}
			lastID, page = next, nil
			continue
		}
		var mark *time.Time
		if bad == 0 {
			mark = &hi
			s.claim = &claim{lo: lo, hi: hi, ref: ref}
		}
		if err := s.flush(mark); err != nil {
			return lastID, false, err
		}
		if mark == nil {
			return lastID, false, fmt.Errorf("%w: %d in %s..%s", ErrBadEntries, bad, lo.Format(time.RFC3339), hi.Format(time.RFC3339))
		}
		s.st.Slices++
		return next, true, nil
	}
}

// increasing checks that ids rise strictly from after; it returns the last id.
func increasing(orders []order.Order, after int64) (int64, bool) {
	for _, o := range orders {
		if o.ID <= after {
			return after, false
		}
		after = o.ID
	}
	return after, true
}

// fetch reads one page of the window; afterID > 0 adds the keyset filter.
func (s *sweep) fetch(ctx context.Context, lo, hi time.Time, page int, afterID int64) (*order.Page, error) {
	if err := s.stop.Err(); err != nil {
		// Shutdown: keep what was read (without moving the watermark).
		if ferr := s.flush(nil); ferr != nil {
			s.p.log.Warn("commit at shutdown failed; the next start reads it again", "err", ferr)
		}
		return nil, err
	}
	cfg := s.p.cfg
	filters := append(make([]order.Filter, 0, len(cfg.Scope)+2), cfg.Scope...)
	filters = append(filters, order.Between("updatedAt", order.At(lo), order.At(hi)))
	if afterID > 0 {
		filters = append(filters, order.Gt("orderId", order.Int(afterID)))
	}
	q := order.Query{
		Filters: filters, Complex: cfg.ScopeComplex,
		SortBy: "orderId", SortOrder: "asc",
		Page: page, ItemsPerPage: cfg.ItemsPerPage,
		With: cfg.With, LazyLoaded: cfg.LazyLoaded,
	}
	p, err := s.p.client.SearchOrders(ctx, q)
	if err != nil {
		s.called(0)
		return nil, fmt.Errorf("sweep %s..%s page %d: %w", lo.Format(time.RFC3339), hi.Format(time.RFC3339), page, err)
	}
	s.st.Pages++
	s.called(len(p.Orders) + len(p.Bad))
	return p, nil
}

// called counts a search call that read n entries and reports progress.
func (s *sweep) called(n int) {
	s.st.Calls++
	s.st.Orders += n
	s.progress()
}

// progress reports where the sweep is (OnProgress), and logs it every
// ProgressEvery during a long sweep with an estimate of what is left.
func (s *sweep) progress() {
	cfg := s.p.cfg
	pr := Progress{
		Calls: s.st.Calls, Orders: s.st.Orders,
		NewCalls: s.st.Calls - s.reported.calls, NewOrders: s.st.Orders - s.reported.orders,
		Lo: s.lo, Hi: s.hi, Position: s.pos, Watermark: s.st.Watermark, FirstSync: 1,
	}
	s.reported.calls, s.reported.orders = s.st.Calls, s.st.Orders
	if s.hi.IsZero() {
		pr.FirstSync = -1 // not known before the window is
	} else if !s.baselineDone {
		from := cfg.StartFrom.Truncate(time.Second)
		pr.FirstSync = 0
		if span := s.baseline.Sub(from); span > 0 && s.pos.After(from) {
			pr.FirstSync = min(float64(s.pos.Sub(from))/float64(span), 1)
		}
	}
	if cfg.OnProgress != nil {
		cfg.OnProgress(pr)
	}
	now := cfg.Now()
	if s.hi.IsZero() || now.Sub(s.st.Start) < cfg.ProgressEvery || now.Sub(s.p.lastProgress) < cfg.ProgressEvery {
		return
	}
	s.p.lastProgress = now
	elapsed := now.Sub(s.st.Start)
	attrs := []any{"position", s.pos.Format(time.RFC3339), "hi", s.hi.Format(time.RFC3339), "calls", s.st.Calls, "orders", s.st.Orders,
		"elapsed", elapsed.Round(time.Second).String()}
	if read := s.pos.Sub(s.lo); read > 0 {
		attrs = append(attrs, "done_pct", int(100*float64(read)/float64(s.hi.Sub(s.lo))),
			"eta", time.Duration(float64(elapsed)*float64(s.hi.Sub(s.pos))/float64(read)).Round(time.Second).String())
	}
	if pr.FirstSync < 1 {
		attrs = append(attrs, "first_sync_pct", int(100*pr.FirstSync))
	}
	s.p.log.Info("sweep in progress", attrs...)
}

// add diffs a page against the snapshot and adds the changed states and
// their events to the pending commit. The ids of one scan rise strictly, so
// no order is twice in a pending commit.
func (s *sweep) add(orders []order.Order, sliceHi time.Time) error {
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
	seen := cfg.Now()
	for i, o := range orders {
		s.p.ev.observe(o.UpdatedAt.Time, seen)
		if !s.startMark.IsZero() && !s.lateFrom.IsZero() && !o.UpdatedAt.Before(s.lateFrom) && !o.UpdatedAt.After(s.startMark) && (prev[i] == nil || prev[i].UpdatedAt.Before(o.UpdatedAt.Time)) {
			s.late(o, s.startMark.Sub(o.UpdatedAt.Time), s.p.inLook || o.UpdatedAt.Before(s.lookBelow))
		}
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

// late notes an entry that became visible after the sweeps had verified
// past its updatedAt: a commit that arrived late by at least d.
//
// look says it was found where a second look reads (below the watermark
// minus the overlap): the sweeps that read its second earlier read it
// young, so it is late by about what they missed (at most freshOverlap or
// half the overlap), as the second look counts it (Run), and no warning.
func (s *sweep) late(o order.Order, d time.Duration, look bool) {
	if s.p.quarantined[o.ID] {
		return // not late: read before, but undecodable (quarantine.go)
	}
	if look && !s.p.inLook {
		d = min(d, min(freshOverlap, s.p.cfg.Overlap/2))
	}
	s.st.LateArrivals = append(s.st.LateArrivals, d)
	if ov := s.p.cfg.Overlap; d >= ov*8/10 && !look {
		s.p.log.Warn("a change arrived late, close to WATCHER_OVERLAP: a later one would be missed; raise WATCHER_OVERLAP or WATCHER_SETTLE",
			"order", o.ID, "updated_at", o.UpdatedAt.Format(time.RFC3339), "late_by", d.String(), "overlap", ov.String())
	}
}

// flush writes the pending states and events in one transaction, with the
// watermark when mark is set (the slice is verified). A transaction per
// slice rather than per page: a crash redoes at most one slice, and the
// sweep pays one fsync per slice.
func (s *sweep) flush(mark *time.Time) error {
	cfg := s.p.cfg
	c := s.pending
	if s.held {
		mark = nil // a slice before is not verified: the watermark waits
	}
	if mark != nil {
		// The watermark stays below the newest stamp served minus settle;
		// the baseline is done once its window is verified.
		wm, recs := s.p.bounded(*mark)
		c.Watermark, c.Records = wm, append(c.Records, recs...)
		now := cfg.Now()
		c.LastSweep = &now
		c.BaselineDone = !mark.Before(s.baseline)
	}
	recs, reads := s.withClaim(c.Records)
	c.Records = recs
	if len(c.States) == 0 && len(c.Events) == 0 && len(c.Quarantine) == 0 && len(c.Records) == 0 && mark == nil && reads == nil {
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
	if reads != nil {
		s.p.reads = *reads
	}
	for _, t := range s.pendingTypes {
		s.st.Events[t]++
	}
	if cfg.OnCommit != nil && len(s.pendingTypes) > 0 {
		cfg.OnCommit(s.pendingTypes)
	}
	if mark != nil {
		if s.p.covered.IsZero() {
			s.p.covered = s.lo // this process's first verified slice
		}
		if c.Watermark != nil && c.Watermark.After(s.st.Watermark) {
			s.st.Watermark = *c.Watermark
		}
		s.pos = *mark
		s.progress()
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
func cut(lo, hi time.Time, first *order.Page, want int64) time.Time {
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
