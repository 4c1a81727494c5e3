package publisher

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/shopid"
)

// drainCore is the core NATS mode: a batch is published in order, flushed
// (the server has received it) and deleted. There is no acknowledgement by a
// subscriber and no dedup: see the package documentation.
func (p *Publisher) drainCore(ctx context.Context, untilEmpty bool) error {
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
		n, err := p.coreBatch(ctx)
		if err != nil {
			if ctx.Err() == nil {
				p.failed(err)
				p.wait(ctx, bo.NextBackOff())
			}
			continue
		}
		if n > 0 {
			bo.Reset()
			p.recovered()
			continue // more may be there
		}
		if untilEmpty {
			return nil
		}
		idle.Reset(p.cfg.Idle)
		select {
		case <-ctx.Done():
		case <-p.notify:
		case <-idle.C:
		}
	}
}

// coreBatch publishes, flushes and deletes the first BatchSize entries.
func (p *Publisher) coreBatch(ctx context.Context) (int, error) {
	if len(p.undeleted) > 0 {
		// Published before, not deleted: deleted first, never sent again
		// (core NATS has no dedup).
		if err := p.outbox.DeleteOutbox(p.undeleted...); err != nil {
			return 0, fmt.Errorf("delete %d published entries from the outbox: %w", len(p.undeleted), err)
		}
		p.noteDeleted(len(p.undeleted), p.undeletedAt)
		p.undeleted = nil
	}
	entries, err := p.outbox.Outbox(0, p.cfg.BatchSize)
	if err != nil {
		return 0, fmt.Errorf("read outbox: %w", err)
	}
	if len(entries) == 0 {
		return 0, nil
	}
	start := time.Now()
	seqs := make([]uint64, len(entries))
	for i := range entries {
		e := &entries[i]
		seqs[i] = e.Seq
		m := &nats.Msg{
			Subject: e.Subject,
			Data:    e.Payload,
			Header:  nats.Header{"Nats-Msg-Id": []string{e.ID}, "Content-Type": contentType},
		}
		if p.shop != nil {
			m.Header[shopid.Header] = p.shop
			m.Header["Nats-Msg-Id"] = []string{events.MsgID(p.shop[0], e.ID)}
		}
		if err := p.nc.PublishMsg(m); err != nil {
			return 0, fmt.Errorf("publish %s (outbox entry %d): %w", e.Subject, e.Seq, notConnected(err))
		}
	}
	// A batch on the wire is flushed and deleted even when ctx ends now:
	// otherwise it would go out twice.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.AckTimeout)
	defer cancel()
	if err := p.nc.FlushWithContext(fctx); err != nil {
		return 0, fmt.Errorf("flush %d published entries: %w", len(entries), notConnected(err))
	}
	if err := p.outbox.DeleteOutbox(seqs...); err != nil {
		p.undeleted, p.undeletedAt = seqs, start
		return 0, fmt.Errorf("delete %d published entries from the outbox: %w", len(entries), err)
	}
	p.noteDeleted(len(entries), start)
	return len(entries), nil
}
