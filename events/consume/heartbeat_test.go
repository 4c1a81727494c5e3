package consume_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events/consume"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// stallProxy forwards TCP connections to a NATS server; while stalled it
// holds back what the server sends (the connection stays up, nothing
// arrives: a server busy with a leader election, a congested link) and
// counts the heartbeats it holds back.
type stallProxy struct {
	addr    string
	stalled atomic.Bool
	mu      sync.Mutex
	held    int // idle heartbeats held back while stalled
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{addr: ln.Addr().String()}
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			conns = append(conns, c, s)
			p.mu.Unlock()
			go io.Copy(s, c)
			go p.down(c, s)
		}
	}()
	return p
}

// down copies the server's bytes to the client; while stalled it keeps
// reading them and holds them back, and sends them on once the stall
// ends.
func (p *stallProxy) down(c, s net.Conn) {
	buf := make([]byte, 64<<10)
	var backlog []byte
	for {
		n, err := s.Read(buf)
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.stalled.Load() {
			backlog = append(backlog, buf[:n]...)
			p.held += bytes.Count(buf[:n], []byte("Idle Heartbeat"))
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		if _, err := c.Write(append(backlog, buf[:n]...)); err != nil {
			return
		}
		backlog = nil
	}
}

func (p *stallProxy) heldHeartbeats() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// TestMessagesGoesOnAfterMissedHeartbeats: the consumer's heartbeats stop
// arriving for a while, the connection up (nats.go reports
// ErrNoHeartbeat, which does not end its iterator): the loop goes on and
// yields the next event; it is not a failure of the consumer.
func TestMessagesGoesOnAfterMissedHeartbeats(t *testing.T) {
	ns := testnats.Start(t)
	js := testnats.JetStream(t, ns.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	proxy := newStallProxy(t, ns.Addr().String())
	c := &consume.Config{URL: "nats://" + proxy.addr, Stream: "ORDERS"}
	nc, _, stream, err := c.Connect(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "hb", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(s string) {
		if _, err := js.Publish(ctx, s, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	publish("orders.created.1")
	var got []string
	var errs []error
	resumed := make(chan struct{})
	stall, unstall := context.WithCancel(ctx) // ends the stall when the loop ended
	defer unstall()
	for msg, err := range consume.Messages(ctx, cons, jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(500*time.Millisecond)) {
		if err != nil {
			errs = append(errs, err) // a consumer that goes on
			continue
		}
		msg.Ack()
		got = append(got, msg.Subject())
		if len(got) == 2 {
			break
		}
		// While the loop waits for the next event: stall until the server
		// sent four heartbeats the client did not get (it reports a
		// missed one after two), then let them through and publish the
		// next event.
		proxy.stalled.Store(true)
		go func() {
			defer close(resumed)
			for proxy.heldHeartbeats() < 4 && stall.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			proxy.stalled.Store(false)
			if _, err := js.Publish(ctx, "orders.created.2", []byte("{}")); err != nil {
				t.Error(err)
			}
		}()
	}
	unstall()
	<-resumed
	if len(got) != 2 {
		t.Errorf("the loop ended after %v with %v (ctx %v); want it to go on past missed heartbeats to orders.created.2", got, errs, ctx.Err())
	}
	for _, err := range errs {
		t.Errorf("the loop yielded %v: a missed heartbeat is not a failure", err)
	}
}
