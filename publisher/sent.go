package publisher

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/state"
)

// Exactly-once past the duplicate window.
//
// A stream drops a second copy of a message by its Nats-Msg-Id only within
// its duplicate window, counted from when the first copy was stored. An
// outbox entry whose PubAck was lost (NATS went away, the process was
// killed between the PubAck and the delete) is sent again after the outage
// or the restart; when that is later than the window, the stream would
// store it twice. So an entry that may have been sent before and is older
// than half the window is first looked up in the stream: the last message
// on its exact subject. The publisher never sends an entry of an order
// before the previous entry of that order is acknowledged (or found), and
// the order id is the subject's last token. So if the entry is stored, the
// last message on its subject is the entry itself or a later entry of the
// order, sent after the entry's PubAck; such a later entry is still in
// the outbox (the background deletes never remove it before the entry,
// acknowledged first) and was sent by an earlier process (this one sends nothing
// of the order before this entry is resolved). If the last message carries
// the entry's id or such a later entry's, the entry is stored and is
// deleted from the outbox without sending; otherwise it is sent.
//
// Which entries may have been sent before:
//   - sent by this process: their first send is in memory (firstSent, on
//     the monotonic clock); looked up once half the window has passed;
//   - left by an earlier process: the publisher keeps a mark in the state
//     file (record "publisher": no entry above sent_through was ever sent),
//     written (a batch ahead) before the first entry above it goes out.
//     Entries up to the mark that this process has not sent are
//     always looked up (a few hundred at most after a restart: those in
//     flight or awaiting their delete), whatever the local clock says.
//     Without the record (the first start of this version) every entry in
//     the outbox at the start counts as possibly sent.

// SendMarks is an optional capability of an Outbox (*state.Store has it):
// the publisher keeps its send mark in the state file, so that after a
// restart only the entries an earlier process may have sent (those up to
// the mark) are looked up in the stream before they are sent.
//
// An Outbox without it keeps no mark across a restart: every entry counts
// as possibly sent and is looked up before its first send (safe: nothing
// is stored twice, but one look-up per entry). It suits an outbox that
// never sends (`watcher check` verifies the stream with an empty one). New
// checks for it, says so in a warning when it is missing in JetStream mode,
// and KeepsSendMarks reports it.
type SendMarks interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (found bool, err error)
	OutboxLastSeq() (uint64, error)
}

var _ SendMarks = (*state.Store)(nil)

// KeepsSendMarks reports whether the outbox keeps the publisher's send
// mark (see SendMarks).
func (p *Publisher) KeepsSendMarks() bool { return p.marks != nil }

// PublisherRecord is the name of the publisher's record in the state file.
const PublisherRecord = "publisher"

// sentRecord is the JSON of the "publisher" record.
type sentRecord struct {
	SentThrough uint64 `json:"sent_through"`
}

// Lookup results (Config.OnLookup).
const (
	LookupStored    = "stored"
	LookupNotStored = "not_stored"
	LookupError     = "error"
)

// readMarks loads the send mark (New, before anything is committed by
// this process): entries in the outbox now that are not above the mark may
// have been sent by an earlier process. Without a record, every entry in
// the outbox now counts (an earlier version kept no mark); entries
// committed later never do.
func (p *Publisher) readMarks() {
	p.prevSent, p.sentMark = math.MaxUint64, math.MaxUint64
	if p.marks == nil {
		return
	}
	var r sentRecord
	found, err := p.marks.LoadRecord(PublisherRecord, &r)
	if err != nil {
		p.log.Warn("the publisher's record in the state file is unreadable; every entry in the outbox counts as possibly sent", "err", err)
	}
	last, lerr := p.marks.OutboxLastSeq()
	switch {
	case lerr != nil:
		p.log.Warn("could not read the outbox; every entry in it counts as possibly sent", "err", lerr)
		return
	case found && err == nil:
		p.prevSent = min(r.SentThrough, last)
	default:
		p.prevSent = last
	}
	p.sentMark = p.prevSent
}

// markSent persists that entries up to seq may be sent from now on. The
// mark is set a batch ahead, so that a trickle of entries costs one write
// per batch, not one per read; the price is up to a batch of needless
// look-ups after a restart.
func (p *Publisher) markSent(seq uint64) error {
	if p.marks == nil || seq <= p.sentMark {
		return nil
	}
	mark := seq + uint64(p.cfg.BatchSize)
	if err := p.marks.SaveRecord(PublisherRecord, sentRecord{SentThrough: mark}); err != nil {
		return fmt.Errorf("save the publisher's send mark: %w", err)
	}
	p.sentMark = mark
	return nil
}

// duplicateWindow is the existing stream's duplicate window.
func (p *Publisher) duplicateWindow() time.Duration { return time.Duration(p.window.Load()) }

// needsLookup reports whether pe may already be in the stream with its id
// forgotten by the duplicate window.
func (p *Publisher) needsLookup(pe *pending) bool {
	if first, ok := p.firstSent[pe.seq]; ok {
		return time.Since(first) >= p.duplicateWindow()/2
	}
	return pe.seq <= p.prevSent
}

// stored looks pe up in the stream: true when the last message on its
// subject is pe.
func (p *Publisher) stored(ctx context.Context, pe *pending) (bool, error) {
	s, _ := p.stream.Load().(jetstream.Stream)
	if s == nil {
		return false, errors.New("stream not checked yet")
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	msg, err := s.GetLastMsgForSubject(ctx, pe.msg.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	// An earlier version sent the event id alone as the Nats-Msg-Id
	// (an upgrade with entries in flight): the event is the same.
	id := events.EventIDOfMsgID(msg.Header.Get(jetstream.MsgIDHeader))
	if id == pe.event {
		return true, nil
	}
	// Another event of the order is the last on the subject. If it is a
	// later entry an earlier process sent (acknowledged entries are
	// deleted in the background: an entry can be acknowledged, its
	// successor sent and stored, and both still be in the outbox at a
	// crash), pe was acknowledged before it went out: pe is stored.
	later, err := p.sentAfter(id, pe.seq)
	if err != nil {
		return false, fmt.Errorf("read outbox: %w", err)
	}
	return later, nil
}

// sentAfter reports whether id is the id of an outbox entry after seq that
// an earlier process may have sent (seq <= prevSent). The ids of those
// entries are read once, when first needed: they are the entries that were
// in flight or awaiting their delete, a few hundred.
func (p *Publisher) sentAfter(id string, seq uint64) (bool, error) {
	if p.prevIDs == nil {
		p.prevIDs = map[string]uint64{}
		for after := uint64(0); after < p.prevSent; {
			es, err := p.outbox.Outbox(after, p.cfg.BatchSize)
			if err != nil {
				p.prevIDs = nil
				return false, err
			}
			for _, e := range es {
				if e.Seq <= p.prevSent {
					p.prevIDs[e.ID] = e.Seq
				}
				after = e.Seq
			}
			if len(es) < p.cfg.BatchSize {
				break
			}
		}
	}
	s, ok := p.prevIDs[id]
	return ok && s > seq, nil
}

func (p *Publisher) noteLookup(result string) {
	if p.cfg.OnLookup != nil {
		p.cfg.OnLookup(result)
	}
}
