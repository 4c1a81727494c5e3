package publisher

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/shopid"
	"github.com/orderwatch/orderwatch/state"
)

// pending is an outbox entry read into memory: waiting behind an entry of
// the same order, ready to be sent, or in flight. One allocation holds the
// message and its id header.
type pending struct {
	msg nats.Msg
	id  [1]string // the Nats-Msg-Id (events.MsgID: unique per shop)
	// event is the event id (the outbox entry's).
	event string
	seq   uint64
	key   string // the order id: the subject's last token
	sent  time.Time
}

// orderKey is the last token of a subject: the order id of every subject of
// diff.Subject.
func orderKey(subject string) string {
	return subject[strings.LastIndexByte(subject, '.')+1:]
}

func newPending(e *state.OutboxEntry, shop []string) *pending {
	pe := &pending{seq: e.Seq, key: orderKey(e.Subject)}
	pe.id[0] = e.ID
	if shop != nil {
		pe.id[0] = events.MsgID(shop[0], e.ID)
	}
	pe.event = e.ID
	pe.msg = nats.Msg{
		Subject: e.Subject,
		Data:    e.Payload,
		Header: nats.Header{
			jetstream.MsgIDHeader: pe.id[:],
			"Content-Type":        contentType,
		},
	}
	if shop != nil {
		pe.msg.Header[shopid.Header] = shop
	}
	return pe
}

// jsAttempt is the state of one pass over the outbox, from the start of the
// outbox until a failure (or the end of the drain).
type jsAttempt struct {
	p      *Publisher
	ctx    context.Context // for look-ups in the stream
	del    *deleter
	cursor uint64 // last Seq read
	// inflight: sent, PubAck awaited.
	inflight map[*nats.Msg]*pending
	// busy holds the orders with an entry in flight or ready, and the
	// entries of the same order read after it, in Seq order.
	busy    map[string][]*pending
	waiting int        // entries in busy's queues
	ready   []*pending // may be sent now (FIFO)
	// exhausted: the last read found no more entries; read again after
	// Notify or Idle.
	exhausted bool
	failure   error
	acked     bool // a PubAck arrived in this attempt
	buf       []result
}

func (p *Publisher) newAttempt() *jsAttempt {
	return &jsAttempt{
		p:        p,
		inflight: make(map[*nats.Msg]*pending, p.cfg.MaxInFlight),
		busy:     make(map[string][]*pending, p.cfg.MaxInFlight),
	}
}

// held reports whether entries are in memory (in flight, ready or waiting).
func (a *jsAttempt) held() bool {
	return len(a.inflight) > 0 || len(a.ready) > 0 || a.waiting > 0
}

func (p *Publisher) drainJetStream(ctx context.Context, untilEmpty bool) error {
	del := p.startDeleter()
	// A failed final delete is reported; those entries are sent again
	// later and dropped by the stream as duplicates.
	defer func() { _ = del.stop() }()
	bo := newBackoff()
	idle := time.NewTimer(p.cfg.Idle)
	defer idle.Stop()
	for {
		if ctx.Err() != nil {
			if untilEmpty {
				return p.flushErr(ctx)
			}
			return nil
		}
		if !p.ensured.Load() {
			if err := p.EnsureStream(ctx); err != nil {
				if ctx.Err() != nil {
					continue
				}
				p.failed(err)
				p.wait(ctx, bo.NextBackOff())
				continue
			}
		}
		// Acknowledged entries not yet deleted (the state file would not
		// take the delete) go first: a new attempt reads the outbox from
		// the start and would send them twice. The deleter reports the
		// failure.
		if err := del.flush(); err != nil {
			p.wait(ctx, bo.NextBackOff())
			continue
		}
		a := p.newAttempt()
		a.ctx, a.del = ctx, del
		done, err := a.run(ctx, untilEmpty, idle, del)
		// Every entry acknowledged so far is deleted before the outbox is
		// read again, so it is not sent twice.
		derr := del.flush()
		if done {
			if derr == nil && (a.cursor == 0 || p.outbox.OutboxDepth() == 0) {
				return nil // this pass found the outbox empty
			}
			continue // committed meanwhile (another pass), or the deletes wait (above)
		}
		if err == nil || errors.Is(err, errDeleteFailing) {
			continue // ctx ended, or wait for the deletes (above)
		}
		p.failed(err)
		if isNoStream(err) {
			p.ensured.Store(false) // check (or create) the stream again
		}
		if a.acked {
			bo.Reset()
		}
		p.wait(ctx, bo.NextBackOff())
	}
}

// errDeleteFailing ends an attempt while acknowledged entries cannot be
// deleted from the outbox.
var errDeleteFailing = errors.New("deleting acknowledged entries from the outbox fails")

// isNoStream: no stream answered a publish (missing stream, JetStream down).
func isNoStream(err error) bool {
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders)
}

// run sends the outbox until a failure, the end of ctx, or (untilEmpty) an
// empty outbox, in which case done is true. It returns when nothing is in
// flight any more, or, after ctx ended, when in-flight PubAcks did not
// resolve within AckTimeout (they are abandoned: still in the outbox, sent
// again later). The deleter receives every acknowledged entry.
func (a *jsAttempt) run(ctx context.Context, untilEmpty bool, idle *time.Timer, del *deleter) (done bool, err error) {
	p := a.p
	maxInFlight, batch := p.cfg.MaxInFlight, p.cfg.BatchSize
	ctxDone := ctx.Done()
	stopping := false
	var abandon <-chan time.Time
	idleArmed := false
	for {
		if a.failure == nil && del.failing.Load() {
			a.failure = errDeleteFailing // send nothing more; end when nothing is in flight
		}
		// Send what may go.
		for a.failure == nil && !stopping && len(a.inflight) < maxInFlight && len(a.ready) > 0 {
			pe := a.ready[0]
			a.ready[0] = nil
			a.ready = a.ready[1:]
			a.send(pe)
		}
		// Read more: one transaction of up to BatchSize entries.
		if a.failure == nil && !stopping && !a.exhausted && len(a.inflight) < maxInFlight && len(a.ready) == 0 && a.waiting < batch {
			entries, err := p.outbox.Outbox(a.cursor, batch)
			if err == nil && len(entries) > 0 {
				// Persisted before any of them goes out: a later process
				// knows which entries may be in the stream already.
				err = p.markSent(entries[len(entries)-1].Seq)
			}
			if err != nil {
				a.failure = fmt.Errorf("read outbox: %w", err)
			} else {
				a.exhausted = len(entries) < batch
				for i := range entries {
					a.admit(&entries[i])
				}
				continue
			}
		}
		if len(a.inflight) == 0 {
			switch {
			case a.failure != nil:
				return false, a.failure
			case stopping:
				return false, nil
			case untilEmpty && a.exhausted && !a.held():
				return true, nil
			}
		}
		if a.exhausted && !idleArmed {
			idle.Reset(p.cfg.Idle)
			idleArmed = true
		}
		select {
		case <-p.results.signal:
			a.collect()
		case <-p.notify:
			a.exhausted = false
		case <-idle.C:
			idleArmed = false
			a.exhausted = false
		case <-ctxDone:
			// Stop sending; wait for what is in flight to settle (every
			// publish resolves within AckTimeout), so that acknowledged
			// entries get deleted now and not sent again after a restart.
			stopping, ctxDone = true, nil
			t := time.NewTimer(p.cfg.AckTimeout + time.Second)
			defer t.Stop()
			abandon = t.C
		case <-abandon:
			return false, nil
		}
	}
}

// admit takes an entry read from the outbox: it waits behind an entry of
// the same order already held, or goes out now (or as soon as a slot frees).
func (a *jsAttempt) admit(e *state.OutboxEntry) {
	a.cursor = e.Seq
	pe := newPending(e, a.p.shop)
	if q, ok := a.busy[pe.key]; ok {
		a.busy[pe.key] = append(q, pe)
		a.waiting++
		return
	}
	a.busy[pe.key] = nil
	if a.failure == nil && len(a.inflight) < a.p.cfg.MaxInFlight && len(a.ready) == 0 {
		a.send(pe)
		return
	}
	a.ready = append(a.ready, pe)
}

// send publishes asynchronously. The entry is registered as in flight before
// the publish: its PubAck may be queued before PublishMsgAsync returns. An
// entry that may be in the stream already, with its id past the duplicate
// window, is looked up first (sent.go).
func (a *jsAttempt) send(pe *pending) {
	p := a.p
	if g := a.p.cfg.Gate; g != nil {
		if err := g(); err != nil {
			// Fenced: not the active replica (any more). Nothing goes out;
			// the entry stays in the outbox.
			a.ready = append([]*pending{pe}, a.ready...)
			a.failure = fmt.Errorf("publish %s: %w", pe.msg.Subject, err)
			return
		}
	}
	pe.sent = time.Now()
	if p.needsLookup(pe) {
		stored, err := p.stored(a.ctx, pe)
		switch {
		case err != nil:
			p.noteLookup(LookupError)
			a.failure = fmt.Errorf("look up outbox entry %d on %s in stream %q before sending it again: %w", pe.seq, pe.msg.Subject, p.cfg.Stream, notConnected(err))
			return
		case stored:
			p.noteLookup(LookupStored)
			p.log.Info("outbox entry already in the stream (its acknowledgement was lost); deleted without sending it again",
				"seq", pe.seq, "subject", pe.msg.Subject, "id", pe.id[0])
			a.acknowledged(pe)
			return
		}
		p.noteLookup(LookupNotStored)
	}
	if _, ok := p.firstSent[pe.seq]; !ok {
		p.firstSent[pe.seq] = pe.sent
	}
	a.inflight[&pe.msg] = pe
	if _, err := a.p.js.PublishMsgAsync(&pe.msg); err != nil {
		delete(a.inflight, &pe.msg)
		a.failure = a.p.publishError(pe, err)
	}
}

// collect processes the queued PubAcks and publish errors.
func (a *jsAttempt) collect() {
	items := a.p.results.take(a.buf)
	for i := range items {
		r := &items[i]
		pe := a.inflight[r.msg]
		if pe == nil {
			continue // abandoned by an earlier attempt; still in the outbox
		}
		delete(a.inflight, r.msg)
		if r.err != nil {
			if a.failure == nil {
				a.failure = a.p.publishError(pe, r.err)
			}
			continue
		}
		if !a.acked {
			a.acked = true
			a.p.recovered()
		}
		if r.ack != nil && r.ack.Duplicate && a.p.cfg.OnDuplicate != nil {
			a.p.cfg.OnDuplicate()
		}
		a.acknowledged(pe)
	}
	clear(items)
	a.buf = items
}

// acknowledged hands a stored entry to the deleter and lets the order's
// next entry go.
func (a *jsAttempt) acknowledged(pe *pending) {
	delete(a.p.firstSent, pe.seq)
	a.del.add(pe.seq, pe.sent)
	if q := a.busy[pe.key]; len(q) > 0 {
		a.ready = append(a.ready, q[0])
		q[0] = nil
		a.busy[pe.key] = q[1:]
		a.waiting--
	} else {
		delete(a.busy, pe.key)
	}
}

// publishError describes a failed publish of an entry, with a hint where
// the cause is a known misconfiguration.
func (p *Publisher) publishError(pe *pending, err error) error {
	switch {
	case isNoStream(err):
		err = fmt.Errorf("no stream answered (is stream %q present and capturing %s.>, is JetStream up?): %w", p.cfg.Stream, p.cfg.SubjectPrefix, err)
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		if le := p.nc.LastError(); le != nil && errors.Is(le, nats.ErrPermissionViolation) {
			err = fmt.Errorf("%w (the server reported: %v)", err, le)
		}
	}
	return fmt.Errorf("publish %s (outbox entry %d): %w", pe.msg.Subject, pe.seq, notConnected(err))
}

// notConnected names the state behind the errors of a publish while the
// connection is down ("outbound buffer limit exceeded": the reconnect
// buffer is disabled, see Connect).
func notConnected(err error) error {
	if errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) || errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("NATS not connected: %w", err)
	}
	return err
}
