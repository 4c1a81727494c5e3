// Package poller is the sweep: it reads order search by updatedAt in time
// windows that lie entirely in the past, verifies every scan (constant
// totalsCount, strictly increasing ids, distinct ids == totalsCount), diffs
// each page against the snapshot and commits snapshot + outbox events in one
// transaction per page. The watermark advances only past verified slices.
//
// Why the verification proves that no change is missed: in a window
// [lo, hi] with hi in the past, an order can only leave the result set (an
// update moves its updatedAt past hi), never enter it. So the set did not
// change during a scan iff totalsCount is the same on every page; ids in
// ascending order and their count prove that no page shifted under us. An
// order that left was updated, and the later window sees its newer state.
package poller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

// Client is what the sweep needs of the service client.
type Client interface {
	SearchOrders(ctx context.Context, q order.Query) (*order.Page, error)
	// ServerNow is the Date estimate the window follows.
	ServerNow() (time.Time, bool)
	// DateNow is what the latest Date headers say even while the client
	// distrusts them: a clock set back is then looked for at once rather
	// than after the client follows the new Date (see latestDate).
	DateNow() (time.Time, bool)
}

// Store is what the sweep needs of the state file.
type Store interface {
	Meta() (state.Meta, error)
	SetBaselineFrom(start, t time.Time) error
	Lookup(ids []int64, out []*diff.State) error
	Commit(c state.Commit) error
	// RewindWatermark moves the watermark back to t (a clock put it ahead).
	RewindWatermark(t time.Time) error
	// Quarantine lists the quarantined orders (Commit notes and releases them).
	Quarantine() ([]state.Quarantined, error)
	// RecordStore keeps the clock evidence across a restart (clockRecord):
	// without it a restart inside a skewed Date would lose the bound that
	// keeps the watermark below the service's clock.
	RecordStore
}

var (
	_ Client = (*plenty.Client)(nil)
	_ Store  = (*state.Store)(nil)
)

// BadEntryPolicy says what a sweep does with an entry it cannot decode.
type BadEntryPolicy string

const (
	// BadEntryQuarantine (default) holds back only the entry's own order:
	// it is noted in the state file's quarantine, the sweep goes on and
	// the watermark advances as if the entry had been read; the order is
	// retried by id until it decodes, then its current state is published
	// (see quarantine.go). An entry whose id cannot be read holds the
	// watermark before its slice (ErrBadEntries) until the service sends
	// it readable.
	BadEntryQuarantine BadEntryPolicy = "quarantine"
	// BadEntryHold is the former name of BadEntryQuarantine, accepted as
	// an alias: it held the watermark before every undecodable entry,
	// which stalled every order behind one bad entry.
	BadEntryHold BadEntryPolicy = "hold"
	// BadEntrySkip logs and counts the entry and goes on: a change of that
	// order can be missed while the service keeps sending it unreadable.
	BadEntrySkip BadEntryPolicy = "skip"
)

// Config tunes the sweep. Zero values take the defaults in brackets.
type Config struct {
	Settle  time.Duration // hi = server now - Settle [10s]
	Overlap time.Duration // lo = watermark - Overlap [60s]
	// StartFrom is where the very first sweep (the baseline) begins.
	StartFrom time.Time
	// Scope filters narrow the sweep (e.g. orderTypeId=1). Complex scope
	// filters make the sweep use POST search. Both are sent to the service:
	// only filters on fields that never change belong here (see
	// diff.SplitScope).
	Scope        []order.Filter
	ScopeComplex *order.Group
	// ScopeLocal is the part of the scope evaluated on before and after of
	// every change (statusId, lockStatus, ...): an order leaving it is
	// published. nil: none.
	ScopeLocal   *diff.Scope
	With         []string
	LazyLoaded   bool
	ItemsPerPage int // requested page size [250]; the envelope's size is what counts
	// SlicePages is the most pages one slice may take before it is cut in
	// smaller time slices [4].
	SlicePages int
	// MaxRescans is how often a slice is rescanned after a failed
	// verification before it is cut smaller (or, at 1s, the sweep ends) [3].
	MaxRescans int
	// Keyset pages a slice that cannot be cut smaller (one second holding
	// more than SlicePages pages, or changing during every rescan) with
	// orderId=gt:<last id>. The filter is not in the spec; real systems
	// accept it. KeysetAuto (default) uses it and falls back to offset
	// paging when the service is found to ignore it.
	Keyset KeysetMode
	// KeysetPages bounds the keyset pages one sweep spends on one bulk
	// second; the rest is read by the next sweeps from where this one
	// stopped, and the slices after the second are read (and their
	// changes published) meanwhile [4 x SlicePages].
	KeysetPages int

	BadEntries    BadEntryPolicy // [quarantine]
	EmitBaseline  bool           // events for the orders the baseline records
	EmitUpdated   bool           // order.updated events
	Source        string         // CloudEvents source
	SubjectPrefix string         // [orders]

	// QuarantineCalls bounds the search calls one sweep spends retrying
	// quarantined orders by id, 50 orders a call [1].
	QuarantineCalls int
	// QuarantineRetryEvery is how long a quarantined order rests after a
	// read found it undecodable before it is retried by id [30s]. A retry
	// the service answers with an error doubles the order's rest, up to
	// 30 minutes (quarantineBackoffMax).
	QuarantineRetryEvery time.Duration

	// OutboxWait is how long the sweep waits before trying a commit again
	// while the outbox is full or the state file not writable [1s].
	OutboxWait time.Duration

	// OnCommit is called after every committed page with the types of the
	// events it added to the outbox, one per event (wakes the publisher,
	// counts them: a sweep's report comes after its second look and probe,
	// and a sweep cut short by a shutdown is not reported). The slice is
	// reused after the call.
	OnCommit func(events []diff.Type)
	// OnBaseline, when set, is called during the first sync before its
	// first reading call, while nothing is verified (no watermark; once
	// per poller once it returned nil): the baseline must reach the
	// group before anything is recorded below it (a hot standby's
	// checkpoint: a successor then syncs with the same baseline instead
	// of its own, later one, which would record silently the changes made
	// in between). An error ends the sweep before it reads.
	OnBaseline func(ctx context.Context, baseline time.Time) error
	// OnProgress is called after every call of a sweep and every verified
	// slice (metrics that move page by page).
	OnProgress func(Progress)
	// ProgressEvery is how often a long sweep logs its progress [10s].
	ProgressEvery time.Duration
	// OnClockJump is called when the order stamps decide about a clock
	// jump (metrics): decision "rewound" when the service's clock went
	// back (confirmed by changes below the watermark) and the watermark was
	// rewound; jump is the move (negative: back).
	OnClockJump func(jump time.Duration, decision string)
	// Yield is called before every sweep after the first once its wait
	// is over: it holds the sweep while the process has more urgent work
	// (a fleet member's takeovers, pipeline.Host), a bounded time. Nil:
	// no hold.
	Yield func(ctx context.Context)

	Logger *slog.Logger
	Now    func() time.Time // local clock, only for durations
	Sleep  func(ctx context.Context, d time.Duration) error
}

// KeysetMode says whether a sweep pages a bulk second by orderId=gt:.
type KeysetMode string

// Keyset modes (WATCHER_KEYSET).
const (
	KeysetAuto KeysetMode = "auto"  // keyset where offset paging fails; off once the service ignores the filter
	KeysetOn   KeysetMode = "true"  // keyset where offset paging fails; an ignored filter is an error
	KeysetOff  KeysetMode = "false" // offset paging only
)

// Progress is where a running sweep is.
type Progress struct {
	Calls, Orders       int       // the sweep's so far
	NewCalls, NewOrders int       // since the last report
	Lo, Hi              time.Time // the sweep's window
	Position            time.Time // every change up to here has been read (verified slices)
	Watermark           time.Time // the verified watermark (zero before the first)
	// FirstSync is the share 0..1 of the first sync (from StartFrom to the
	// baseline point) verified; 1 once the baseline is done; -1 when not
	// known yet (the call that learns the server clock).
	FirstSync float64
}

// Stats are the figures of one sweep.
type Stats struct {
	Start        time.Time
	Duration     time.Duration
	Lo, Hi       time.Time // the window swept
	Calls        int       // search calls made
	Pages        int       // pages read
	Orders       int       // entries read (rescans included)
	Entries      int       // entries the verified slices held (each once)
	Slices       int       // verified slices committed
	Rescans      int       // scans that failed verification and were redone
	BadEntries   int
	Events       map[diff.Type]int
	OutboxWaits  int           // commits that waited for a full outbox
	StateWaits   int           // commits that waited for the state file to be writable
	Watermark    time.Time     // after the sweep
	WatermarkLag time.Duration // server now - watermark
	Baseline     bool          // the sweep was (part of) the baseline
	// Held is the bulk second the watermark waits at while it is read by
	// keyset over several sweeps or cannot be verified (zero: none); the
	// slices after it were read and their changes committed.
	Held time.Time
	// Rewound is the watermark found ahead of server time minus settle, or
	// ahead of changes stamped by a clock that went back, and rewound
	// (zero: none).
	Rewound time.Time
	// KeysetSlices are the bulk seconds paged by keyset.
	KeysetSlices int
	// QuarantineEntered and QuarantineLeft count the orders that entered
	// and left the quarantine; QuarantineRetries the orders asked for by id.
	QuarantineEntered, QuarantineLeft, QuarantineRetries int
	// LateArrivals are the entries read in the overlap with an updatedAt
	// below the watermark the sweep started from, which the earlier sweeps
	// had not seen: how far below it each one was.
	LateArrivals []time.Duration
	// Filled in by Run: the requests charged to the call budget for the
	// sweep (every one that went out: logins and retries included), the
	// time to the next sweep's start, why it is longer than the interval
	// (""), and the call budget left.
	Charged     int
	NextGap     time.Duration
	GapReason   string
	BudgetLeft  float64
	BudgetKnown bool
	// Timings are the interval, settle and overlap in force after the
	// sweep and where they come from (filled in by Run); Probe says a
	// slice of a probe (Timings) was read after the sweep: its figures are
	// in the Calls, Pages, Orders, Events and LateArrivals above.
	Timings InForce
	Probe   bool
	// SecondLook says the part of the window that left the overlap was
	// read once more after the sweep (secondlook.go); its figures are in
	// the ones above.
	SecondLook bool
	// ReadOwed is how long the oldest stamp still owed a read at a
	// promised age has been due (the read ledger; 0: none). Filled in by
	// Run.
	ReadOwed time.Duration
}

// add adds the figures of a read made after the sweep (a second look, a
// probe's slice) to the sweep's.
func (s *Stats) add(r Stats) {
	s.Calls += r.Calls
	s.Pages += r.Pages
	s.Orders += r.Orders
	s.Rescans += r.Rescans
	s.BadEntries += r.BadEntries
	for typ, n := range r.Events {
		s.Events[typ] += n
	}
}

// EventCount is the number of events of all types.
func (s Stats) EventCount() int {
	n := 0
	for _, c := range s.Events {
		n += c
	}
	return n
}

// Poller runs sweeps.
type Poller struct {
	cfg    Config
	client Client
	store  Store
	log    *slog.Logger

	// Sweeps run one at a time; what they carry from one to the next:
	keysetIgnored bool       // the service ignores orderId=gt: (auto mode)
	bulk          bulkCursor // a bulk second read by keyset over several sweeps
	lastProgress  time.Time  // last progress log line

	byIDIgnored bool           // the service does not accept orderId=in: (no retry by id)
	quarantined map[int64]bool // the quarantined orders, read at each sweep's start
	ev          evidence       // the newest stamp served: the watermark's bound
	evLoaded    bool           // the clock record was read
	// covered: this poller's own verified sweeps have read every window
	// from here up to the watermark (zero: none verified yet). A late
	// arrival is measured only there: below it, or before this process's
	// first verified slice (a start, a takeover on a restored snapshot
	// that lacks the changes of updatedAt alone), an entry the snapshot
	// lacks says nothing about commits arriving late.
	covered time.Time
	// reread is what the next sweep reads below the watermark (0: the
	// overlap); Run sets it (secondlook.go). page is the service's page
	// size, as its envelopes say.
	reread time.Duration
	page   int64
	// pageSpan is the stretch of the timeline that fills a page at the
	// measured density while the sweeps split (0: none planned): a sweep
	// whose window is over it by a sliver reads up to it (fits).
	pageSpan time.Duration
	// inLook: a second look is under way (its late arrivals were missed
	// by the split sweeps only, within the overlap).
	inLook bool
	// baselineTold: OnBaseline returned nil.
	baselineTold bool

	rescan atomic.Pointer[rescanRequest] // a rescan waiting for the end of a sweep (rescan.go)

	// The read ledger (ledger.go, reads.go), loaded with the first sweep
	// or recheck; legacyChecked is the second look's position an earlier
	// version kept in the budget's record (migrated into the ledger when
	// it has none); probeLevel the age the probes owe (0: no probes).
	reads         ledger
	readsLoaded   bool
	legacyChecked time.Time
	probeLevel    time.Duration
	// rebulk is how far a recheck got in a bulk second (bulk).
	rebulk bulkCursor
	// cursorsLoaded: the bulk cursors were read from the state file
	// (bulkcursor.go).
	cursorsLoaded bool
}

// bulkCursor is how far keyset paging got in one second, and the
// reference (the service's clock) when it began: the second is read
// completely as of then once the cursor gets to its end.
type bulkCursor struct {
	at    time.Time
	after int64
	ref   time.Time
}

// New returns a poller; it makes no call.
func New(client Client, store Store, cfg Config) (*Poller, error) {
	if cfg.Settle <= 0 {
		cfg.Settle = 10 * time.Second
	}
	if cfg.Overlap < 0 {
		return nil, errors.New("poller: overlap must not be negative")
	}
	if cfg.Overlap == 0 {
		cfg.Overlap = 60 * time.Second
	}
	if cfg.ItemsPerPage <= 0 {
		cfg.ItemsPerPage = 250
	}
	if cfg.SlicePages <= 0 {
		cfg.SlicePages = 4
	}
	switch cfg.Keyset {
	case "":
		cfg.Keyset = KeysetAuto
	case KeysetAuto, KeysetOn, KeysetOff:
	default:
		return nil, fmt.Errorf("poller: keyset mode %q: want auto, true or false", cfg.Keyset)
	}
	if cfg.KeysetPages <= 0 {
		cfg.KeysetPages = 4 * cfg.SlicePages
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = 10 * time.Second
	}
	if cfg.MaxRescans <= 0 {
		cfg.MaxRescans = 3
	}
	switch cfg.BadEntries {
	case "", BadEntryHold:
		cfg.BadEntries = BadEntryQuarantine
	case BadEntryQuarantine, BadEntrySkip:
	default:
		return nil, fmt.Errorf("poller: bad-entry policy %q: want quarantine (alias hold) or skip", cfg.BadEntries)
	}
	if cfg.QuarantineCalls <= 0 {
		cfg.QuarantineCalls = 1
	}
	if cfg.QuarantineRetryEvery <= 0 {
		cfg.QuarantineRetryEvery = 30 * time.Second
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = "orders"
	}
	if err := diff.ValidPrefix(cfg.SubjectPrefix); err != nil {
		return nil, fmt.Errorf("poller: %w", err)
	}
	if cfg.OutboxWait <= 0 {
		cfg.OutboxWait = time.Second
	}
	if cfg.StartFrom.IsZero() {
		return nil, errors.New("poller: StartFrom is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = plenty.Sleep
	}
	q := order.Query{Filters: cfg.Scope, Complex: cfg.ScopeComplex}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("poller: scope filter: %w", err)
	}
	for _, f := range cfg.Scope {
		if f.Field == "updatedAt" || f.Field == "orderId" {
			return nil, fmt.Errorf("poller: scope filter %s: the sweep sets this field itself", f.Field)
		}
	}
	return &Poller{cfg: cfg, client: client, store: store, log: cfg.Logger}, nil
}
