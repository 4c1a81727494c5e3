package mirror_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/shopid"
	"github.com/orderwatch/orderwatch/state"
)

// shopStream publishes events of two shops (and garbage) on the shared
// subjects orders.> of one stream, and remembers shop b's last states.
type shopStream struct {
	t    *testing.T
	js   jetstream.JetStream
	mu   sync.Mutex
	last map[int64]diff.State // shop b's
	seq  uint64
	n    int
}

// publish publishes an event of shop (header; "" none: source tells)
// for order id.
func (p *shopStream) publish(shop, source string, id int64) {
	p.t.Helper()
	p.mu.Lock()
	p.n++
	k := p.n
	p.mu.Unlock()
	after := orderState([]string{"6", "7"}[k%2], t0.Add(time.Duration(k)*time.Minute))
	ev := diff.Event{Type: diff.Created, OrderID: id, After: after, Order: []byte(fmt.Sprintf(`{"id":%d}`, id))}
	ev.ID = fmt.Sprintf("%s-%d-%d", shop+source, id, after.UpdatedAt.UnixNano())
	msg := &nats.Msg{Subject: fmt.Sprintf("orders.created.%d", id), Data: diff.Encode(nil, ev, source), Header: nats.Header{}}
	if shop != "" {
		msg.Header.Set(shopid.Header, shop)
	}
	p.send(msg, func() {
		if shop == "shop-b" || (shop == "" && source == "https://b.example") {
			p.last[id] = after
		}
	})
}

// garbage publishes a message of shop b that does not decode.
func (p *shopStream) garbage() {
	p.t.Helper()
	msg := &nats.Msg{Subject: "orders.created.99", Data: []byte("{not an event"), Header: nats.Header{shopid.Header: []string{"shop-b"}}}
	p.send(msg, func() {})
}

func (p *shopStream) send(msg *nats.Msg, applied func()) {
	ack, err := p.js.PublishMsg(context.Background(), msg)
	if err != nil {
		p.t.Error(err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq = max(p.seq, ack.Sequence)
	applied()
}

// mixed publishes n messages on the subjects: mostly shop b's events,
// among them (from the third on) a message that does not decode, shop a's
// events for shop b's order ids (later states: applied, they would move
// shop b's orders), and an event from before shop ids of either shop.
func (p *shopStream) mixed(n int) {
	for i := range n {
		id := int64(1 + i%3)
		switch i % 6 {
		case 2:
			p.garbage()
		case 3:
			p.publish("shop-a", "https://a.example", id)
		case 4:
			p.publish("", []string{"https://a.example", "https://b.example"}[i%2], id)
		default:
			p.publish("shop-b", "https://b.example", id)
		}
	}
}

// checkMirrored checks that shop b's standby holds exactly b's last
// states and has read to the stream's end.
func (p *shopStream) checkMirrored(what string, m *mirror.Mirror, st *state.Store) {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.Seq() != p.seq {
		p.t.Errorf("%s: mirrored up to %d, want the stream's last %d", what, m.Seq(), p.seq)
	}
	for id := int64(1); id <= 3; id++ {
		got, want := lookup(p.t, st, id), p.last[id]
		switch {
		case want.UpdatedAt.IsZero() && got != nil:
			p.t.Errorf("%s: order %d = %+v; shop b has no event of it", what, id, got)
		case !want.UpdatedAt.IsZero() && (got == nil || !got.Same(want)):
			p.t.Errorf("%s: order %d = %+v; want shop b's last %+v", what, id, got, want)
		}
	}
}

// TestCatchUpReadsTheFirstEventsAsTheConsumerDoes: the takeover's
// catch-up reads up to 8 events after the position by direct gets, the
// rest with an ordered consumer. Either way shop b's standby applies
// exactly what the consumer applied before: b's events, not shop a's on
// the same subjects nor a message that does not decode; with exactly 8,
// 9 or 17 messages after the position, and with events published while
// it reads (a catch-up after it reads them, none is missed).
func TestCatchUpReadsTheFirstEventsAsTheConsumerDoes(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 7, 8, 9, 17} {
		t.Run(fmt.Sprintf("%d messages", n), func(t *testing.T) {
			s := runServer(t)
			ctx := context.Background()
			js := operator(t, s)
			m, st := shopBStandby(t, js)
			p := &shopStream{t: t, js: js, last: map[int64]diff.State{}}
			p.mixed(n)
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			p.checkMirrored("after the first catch-up", m, st)

			// n more after the position, as the standby's next takeover
			// finds them.
			p.mixed(n)
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			p.checkMirrored("after the second catch-up", m, st)

			// Published while it reads.
			done := make(chan struct{})
			go func() { defer close(done); p.mixed(3 * n) }()
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			<-done
			if err := m.CatchUp(ctx); err != nil {
				t.Fatal(err)
			}
			p.checkMirrored("after the catch-ups during and after more events", m, st)
		})
	}
}
