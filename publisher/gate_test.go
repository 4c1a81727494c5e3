package publisher_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/publisher"
)

// A publisher whose gate refuses sends nothing and keeps the outbox; once
// the gate opens it drains as usual.
func TestGateHoldsEveryPublish(t *testing.T) {
	srv := runServer(t, nil)
	_, js := plainConn(t, srv.url())
	st := openStore(t, false)
	var open atomic.Bool
	p, err := publisher.New(connect(t, srv.url()), st, publisher.Config{
		Stream: "ORDERS", CreateStream: true, SubjectPrefix: "orders", Idle: 20 * time.Millisecond,
		Gate: func() error {
			if open.Load() {
				return nil
			}
			return errors.New("standby")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	es := entries(1, 5, 1)
	commit(t, st, es)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.Flush(ctx); err == nil {
		t.Fatal("Flush through a closed gate succeeded")
	}
	if st.OutboxDepth() != 5 {
		t.Errorf("outbox %d after a closed gate, want 5", st.OutboxDepth())
	}
	if s, err := js.Stream(context.Background(), "ORDERS"); err == nil {
		if info, _ := s.Info(context.Background()); info != nil && info.State.Msgs != 0 {
			t.Errorf("%d messages in the stream through a closed gate", info.State.Msgs)
		}
	}
	open.Store(true)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := p.Flush(ctx2); err != nil {
		t.Fatal(err)
	}
	checkStream(t, readStream(t, js, "ORDERS"), es)
}
