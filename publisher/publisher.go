// Package publisher drains the transactional outbox of the state file to NATS:
// into a JetStream stream (exactly once, also past the stream's duplicate
// window: see sent.go) or, without a stream, as core NATS messages (nothing
// kept: see Core NATS).
//
// # Delivery
//
// Every outbox entry is a ready CloudEvents JSON message (state.OutboxEntry).
// It is published to the entry's subject with the headers
//
//	Nats-Msg-Id:     <shop id>:<event id>  (events.MsgID; the event id alone without a shop)
//	Content-Type:    application/cloudevents+json
//	Orderwatch-Shop: <shop id>             (when Config.Shop is set)
//
// The shop in the Nats-Msg-Id keeps shops that share a stream apart: their
// event ids hash the order, not the shop, and would collide for the same
// change of the same order id in the same second.
//
// and deleted from the outbox only after the stream acknowledged it (PubAck).
// A PubAck that reports a duplicate counts as an acknowledgement: it is the
// case of a crash between the PubAck and the delete, and the stream dropped
// the second copy by its Nats-Msg-Id. Nothing is ever dropped from the
// outbox without an acknowledgement: on a failure (NATS down, no stream
// responding, PubAck timeout) the publisher waits for what is still in
// flight, backs off (exponential, jittered, capped at 30 s, cut short when
// the connection comes back) and sends the unacknowledged entries again.
//
// # Order per order
//
// Entries go out in outbox (Seq) order, up to Config.MaxInFlight publishes
// awaiting their PubAck. With several publishes in flight, a failure of one
// of them would let a later event overtake an earlier one: if the earlier
// publish is lost (disconnect, timeout) while the later one is stored,
// resending the earlier one appends it after the later one. Waiting for all
// acks and resending "from the earliest unacknowledged entry" does not
// repair that, because the later entry is already stored.
//
// The publisher therefore never has two entries of the same order in flight
// at once. The order id is the last token of every subject (diff.Subject);
// an entry whose order already has an entry in flight waits in memory behind
// it and is sent only after that entry's PubAck, that is, after the earlier
// event is stored in the stream. Entries of different orders are not held
// back, so the pipeline stays full; a stream's order across orders may
// differ from the outbox order, the order of the events of one order never
// does. This holds across failures, resends, reconnects and restarts: the
// earlier entry stays in the outbox until it is acknowledged, it is always
// read (and sent) before the later one, and the later one cannot be in
// flight before the earlier one's PubAck. Duplicate acknowledgements are
// acknowledgements, so a resent copy never blocks an order. The cost is one
// PubAck round trip for an event that follows another of its order closely
// in the outbox (a status and a lock change of one page); the pipeline keeps
// sending other orders meanwhile (BenchmarkDrainPairs).
//
// (JetStream's expected-last-sequence headers cannot express this: the
// events of one order have different subjects, and a rejected publish would
// need the same recovery.)
//
// # Deletes
//
// Acknowledged entries are deleted in the background in one transaction per
// group (deleter.go): up to 8192 entries or 50 ms, and always before the
// outbox is read again after a failure and before Flush returns. An entry
// acknowledged but not yet deleted when the process dies is sent again after
// the restart and dropped by the stream as a duplicate, or, past the
// duplicate window, found in the stream and deleted without sending
// (sent.go).
//
// # Core NATS
//
// With Config.Stream empty, entries are published as core NATS messages in
// order, a batch at a time, followed by a flush (the server has them), then
// deleted. Core NATS keeps nothing: a subscriber that is not connected at
// that moment misses the message. A flush that fails after
// the server received part of a batch makes the batch go out again, so a
// connected subscriber may see a message twice; the event id identifies it.
package publisher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/state"
)

// Outbox is what the publisher needs of the state file (implemented by
// *state.Store). An Outbox that is also a SendMarks lets a restart look up
// only the entries an earlier process may have sent (see SendMarks).
type Outbox interface {
	Outbox(afterSeq uint64, max int) ([]state.OutboxEntry, error)
	DeleteOutbox(seqs ...uint64) error
	OutboxDepth() int
}

var _ Outbox = (*state.Store)(nil)

// Config configures a Publisher. Zero values take the defaults in brackets.
type Config struct {
	// Stream is the JetStream stream; "" = core NATS mode (publish + flush,
	// nothing kept, no dedup).
	Stream string
	// CreateStream creates the stream when it is missing (EnsureStream).
	CreateStream bool
	// SubjectPrefix is the first token(s) of every subject ["orders"]; the
	// stream must capture "<prefix>.>".
	SubjectPrefix string
	// DuplicateWindow of a created stream [10m]: a resent entry is dropped
	// by the stream within this window.
	DuplicateWindow time.Duration
	// MaxAge of the messages of a created stream; 0 = unlimited.
	MaxAge time.Duration
	// MaxBytes of a created stream; 0 = unlimited.
	MaxBytes int64
	// Replicas of a created stream [1].
	Replicas int
	// Shop is the shop's id (package shopid): every message carries it in
	// the Orderwatch-Shop header, and the stream is this shop's (its
	// metadata, see EnsureStream). Empty: no header, no owner.
	Shop string
	// ShopURL names the shop (the service URL) in the stream's metadata
	// and in the error when the stream is another shop's.
	ShopURL string
	// StreamOwner, when set, is the owner the stream's metadata names
	// instead of Shop: a fleet's stream, shared by its shops (their
	// events told apart by the Orderwatch-Shop header and subjects).
	StreamOwner string
	// MaxInFlight is the number of async publishes awaiting a PubAck [256].
	MaxInFlight int
	// BatchSize is the number of outbox entries read per transaction [512].
	BatchSize int
	// AckTimeout is the wait for one PubAck (JetStream) or one flush (core NATS) [5s].
	AckTimeout time.Duration
	// Idle is how often Run looks at an empty outbox when not notified [1s].
	Idle time.Duration
	// Logger receives the publisher's log lines ("component" = "publisher").
	Logger *slog.Logger
	// OnPublished is called after every outbox delete: n entries were
	// acknowledged and deleted; d is the time from the publish of the
	// oldest of them to the delete (the worst publish latency of the batch).
	OnPublished func(n int, d time.Duration)
	// Gate, when set, is asked before every publish (JetStream mode); an
	// error holds the publish back (the lease of a hot standby group: a
	// replica that is not active, or past its lease deadline, publishes
	// nothing).
	Gate func() error
	// OnError is called for every failed attempt (publish, PubAck, flush,
	// outbox read or delete, stream check); the publisher retries.
	OnError func(err error)
	// OnDuplicate is called for every PubAck that reports a duplicate: the
	// stream already had the entry (dropped by its Nats-Msg-Id).
	OnDuplicate func()
	// OnLookup is called for every look-up of an entry in the stream
	// before it is sent again past the duplicate window: result is
	// "stored" (deleted without sending), "not_stored" (sent) or "error".
	OnLookup func(result string)
}

// Publisher drains an outbox to NATS. Run and Flush may be called from
// different goroutines; they never drain at the same time.
type Publisher struct {
	nc     *nats.Conn
	js     jetstream.JetStream // nil in core NATS mode
	outbox Outbox
	cfg    Config
	log    *slog.Logger

	notify  chan struct{} // cap 1: entries were committed
	sem     chan struct{} // cap 1: held by the drain in progress
	results results       // PubAcks and publish errors, from the NATS goroutines
	status  chan nats.Status

	published atomic.Uint64
	ensured   atomic.Bool // the stream was found or created and checked
	shop      []string    // the Orderwatch-Shop header's value (nil: none); never modified

	// Exactly-once past the duplicate window (sent.go); only the drain
	// holding sem touches these but window and stream.
	window    atomic.Int64         // the existing stream's duplicate window (nanos)
	stream    atomic.Value         // jetstream.Stream of the last EnsureStream
	marks     SendMarks            // nil: the outbox keeps no send marks (see SendMarks)
	prevSent  uint64               // entries up to this Seq may have been sent by an earlier process
	sentMark  uint64               // persisted: no entry above it was ever sent
	firstSent map[uint64]time.Time // this process's first send of each unacknowledged entry
	prevIDs   map[string]uint64    // ids of the entries up to prevSent, read when first needed

	sigMu   sync.Mutex
	deleted chan struct{} // closed (and replaced) after every outbox delete

	// Entries acknowledged (or flushed) whose delete from the outbox failed
	// (the state file not writable): they are deleted before anything is
	// read from the outbox again, which would send them twice. Only the
	// drain holding sem touches them.
	undeleted   []uint64
	undeletedAt time.Time // the earliest publish among them

	// Failure reporting (the drain and its deleter).
	failMu    sync.Mutex
	failCause string
	failSince time.Time
	failCount int
}

// ContentType is the Content-Type header of every message.
const ContentType = diff.ContentType

// contentType is shared by the headers of all messages; never modified.
var contentType = []string{ContentType}

// New returns a publisher of outbox to nc. It does not talk to NATS; call
// EnsureStream (or let Run do it) to check the stream.
func New(nc *nats.Conn, outbox Outbox, cfg Config) (*Publisher, error) {
	if nc == nil {
		return nil, errors.New("publisher: no NATS connection")
	}
	if outbox == nil {
		return nil, errors.New("publisher: no outbox")
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = "orders"
	}
	if err := diff.ValidPrefix(cfg.SubjectPrefix); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	if cfg.Stream != "" {
		if err := validStreamName(cfg.Stream); err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
	}
	setDefault(&cfg.DuplicateWindow, 10*time.Minute)
	setDefault(&cfg.Replicas, 1)
	setDefault(&cfg.MaxInFlight, 256)
	setDefault(&cfg.BatchSize, 512)
	setDefault(&cfg.AckTimeout, 5*time.Second)
	setDefault(&cfg.Idle, time.Second)
	switch {
	case cfg.MaxAge < 0 || cfg.MaxBytes < 0:
		return nil, fmt.Errorf("publisher: negative stream limit (max age %v, max bytes %d)", cfg.MaxAge, cfg.MaxBytes)
	case cfg.MaxAge > 0 && cfg.DuplicateWindow > cfg.MaxAge:
		return nil, fmt.Errorf("publisher: duplicate window %v is longer than the stream's max age %v: JetStream refuses it; shorten the window or keep messages longer", cfg.DuplicateWindow, cfg.MaxAge)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{
		nc:        nc,
		outbox:    outbox,
		cfg:       cfg,
		log:       log.With("component", "publisher"),
		notify:    make(chan struct{}, 1),
		sem:       make(chan struct{}, 1),
		deleted:   make(chan struct{}),
		results:   results{signal: make(chan struct{}, 1)},
		firstSent: map[uint64]time.Time{},
	}
	if cfg.Shop != "" {
		p.shop = []string{cfg.Shop}
	}
	if m, ok := outbox.(SendMarks); ok {
		p.marks = m
	} else if cfg.Stream != "" {
		p.log.Warn("the outbox keeps no send marks (publisher.SendMarks): every entry is looked up in the stream before its first send")
	}
	p.readMarks()
	if cfg.Stream != "" {
		js, err := jetstream.New(nc,
			jetstream.WithPublishAsyncMaxPending(cfg.MaxInFlight),
			jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
			jetstream.WithDefaultTimeout(cfg.AckTimeout),
			// The handlers run on NATS goroutines, the error handler of a
			// timeout even under the library's lock: they only queue.
			jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) {
				p.results.push(result{msg: m, ack: ack})
			}),
			jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
				p.results.push(result{msg: m, err: err})
			}),
		)
		if err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
		p.js = js
	}
	// Wakes a retry wait when the connection is back. The listener lives as
	// long as the connection; a full buffer drops events (never blocks NATS).
	p.status = nc.StatusChanged(nats.CONNECTED)
	return p, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// validStreamName applies JetStream's rules for stream names.
func validStreamName(name string) error {
	if strings.ContainsAny(name, " \t\r\n.*>/\\") {
		return fmt.Errorf("stream name %q: must not contain whitespace, '.', '*', '>', '/' or '\\'", name)
	}
	return nil
}

// Notify wakes the drain: new entries were committed. It never blocks.
func (p *Publisher) Notify() {
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

// Connected reports whether the NATS connection is up (readiness).
func (p *Publisher) Connected() bool { return p.nc.IsConnected() }

// Ready says why publishing does not work right now, or nil: NATS
// disconnected, the stream not (yet) checked, or publishing failing since
// the last success (for the watcher's readiness probe).
func (p *Publisher) Ready() error {
	if !p.nc.IsConnected() {
		return errors.New("NATS not connected")
	}
	p.failMu.Lock()
	cause, since := p.failCause, p.failSince
	p.failMu.Unlock()
	if cause != "" {
		return fmt.Errorf("publishing failing since %s: %s", since.Format(time.RFC3339), cause)
	}
	if p.cfg.Stream != "" && !p.ensured.Load() {
		return fmt.Errorf("stream %s not checked yet", p.cfg.Stream)
	}
	return nil
}

// Published is the number of entries acknowledged (PubAck, or flushed in core
// NATS mode) and deleted from the outbox since New.
func (p *Publisher) Published() uint64 { return p.published.Load() }

// Run drains the outbox until ctx is done, then returns nil. It publishes
// what is in the outbox, then waits for Notify (or Config.Idle) to look
// again. NATS outages and stream errors never end it: it retries with
// backoff and logs a failure when it changes, not on every retry. In
// JetStream mode it checks (or creates) the stream with EnsureStream before
// the first publish and again after publishes found no stream.
//
// When ctx ends Run stops sending and waits for the PubAcks of what is in
// flight (about Config.AckTimeout at most), so that acknowledged entries
// are deleted and not sent again after a restart.
func (p *Publisher) Run(ctx context.Context) error {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	defer func() { <-p.sem }()
	err := p.drain(ctx, false)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Flush publishes everything in the outbox and returns nil once it is
// empty, or an error when ctx ends first (shutdown: bound it by ctx). When
// Run is draining at the same time, Flush wakes it and waits for the outbox
// to become empty.
func (p *Publisher) Flush(ctx context.Context) error {
	for {
		select {
		case p.sem <- struct{}{}:
			err := p.drain(ctx, true)
			<-p.sem
			return err
		default:
		}
		if p.outbox.OutboxDepth() == 0 {
			return nil
		}
		p.Notify()
		deleted := p.deletedSignal()
		select {
		case <-ctx.Done():
			return p.flushErr(ctx)
		case <-deleted:
		case p.sem <- struct{}{}:
			err := p.drain(ctx, true)
			<-p.sem
			return err
		}
	}
}

func (p *Publisher) flushErr(ctx context.Context) error {
	return fmt.Errorf("flush outbox: %d entries left: %w", p.outbox.OutboxDepth(), context.Cause(ctx))
}

// drain runs the mode's loop; untilEmpty returns once the outbox is empty.
func (p *Publisher) drain(ctx context.Context, untilEmpty bool) error {
	if p.js == nil {
		return p.drainCore(ctx, untilEmpty)
	}
	return p.drainJetStream(ctx, untilEmpty)
}

func (p *Publisher) deletedSignal() <-chan struct{} {
	p.sigMu.Lock()
	defer p.sigMu.Unlock()
	return p.deleted
}

// noteDeleted accounts for n acknowledged entries deleted from the outbox.
func (p *Publisher) noteDeleted(n int, oldest time.Time) {
	p.published.Add(uint64(n))
	if p.cfg.OnPublished != nil {
		p.cfg.OnPublished(n, time.Since(oldest))
	}
	p.sigMu.Lock()
	close(p.deleted)
	p.deleted = make(chan struct{})
	p.sigMu.Unlock()
}

// newBackoff is the retry schedule: exponential from 200 ms, jittered by
// ±50 %, capped at 30 s, never giving up.
func newBackoff() *backoff.ExponentialBackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 200 * time.Millisecond
	b.RandomizationFactor = 0.5
	b.Multiplier = 2
	b.MaxInterval = 30 * time.Second
	b.MaxElapsedTime = 0
	b.Reset()
	return b
}

// failed reports a failed attempt: OnError always, a log line only when the
// cause differs from the previous failure's.
func (p *Publisher) failed(err error) {
	if p.cfg.OnError != nil {
		p.cfg.OnError(err)
	}
	p.failMu.Lock()
	defer p.failMu.Unlock()
	p.failCount++
	cause := rootCause(err).Error()
	if p.failSince.IsZero() {
		p.failSince = time.Now()
	}
	if cause == p.failCause {
		return
	}
	p.failCause = cause
	p.log.Warn("publishing failed; retrying with backoff until it works",
		"err", err, "outbox_depth", p.outbox.OutboxDepth(), "stream", p.cfg.Stream)
}

// recovered logs the end of a run of failures.
func (p *Publisher) recovered() {
	p.failMu.Lock()
	defer p.failMu.Unlock()
	if p.failCount == 0 {
		return
	}
	p.log.Info("publishing recovered", "failed_attempts", p.failCount,
		"after", time.Since(p.failSince).Round(time.Millisecond).String(), "outbox_depth", p.outbox.OutboxDepth())
	p.failCause, p.failSince, p.failCount = "", time.Time{}, 0
}

// rootCause is the innermost error of a chain of single wraps.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// wait sleeps d, returning early when the NATS connection comes back (the
// next attempt will likely work) or false when ctx ends.
func (p *Publisher) wait(ctx context.Context, d time.Duration) bool {
	// Forget reconnects that happened before this wait.
	for p.status != nil && len(p.status) > 0 {
		<-p.status
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case _, ok := <-p.status:
		if !ok { // never closed by nats.go today; do not spin if it is
			p.status = nil
			select {
			case <-ctx.Done():
				return false
			case <-t.C:
			}
		}
	}
	return true
}

// result is a PubAck or a publish error delivered by the NATS client.
type result struct {
	msg *nats.Msg
	ack *jetstream.PubAck
	err error
}

// results is an unbounded queue from the NATS goroutines to the drain: a
// push never blocks (the library calls the timeout handler under its lock).
type results struct {
	mu     sync.Mutex
	items  []result
	signal chan struct{} // cap 1
}

func (r *results) push(x result) {
	r.mu.Lock()
	r.items = append(r.items, x)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// take returns the queued results, reusing buf for the next take.
func (r *results) take(buf []result) []result {
	r.mu.Lock()
	items := r.items
	r.items = buf[:0]
	r.mu.Unlock()
	return items
}
