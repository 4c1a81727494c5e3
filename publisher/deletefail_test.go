package publisher_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// failingDeletes is a real store whose deletes fail while fail is set, as
// when the state file's disk is full.
type failingDeletes struct {
	*state.Store
	fail     atomic.Bool
	attempts atomic.Int64
}

func (f *failingDeletes) DeleteOutbox(seqs ...uint64) error {
	if f.fail.Load() {
		f.attempts.Add(1)
		return fmt.Errorf("delete from outbox: %w", state.ErrNotWritable)
	}
	return f.Store.DeleteOutbox(seqs...)
}

// While acknowledged entries cannot be deleted from the outbox, nothing is
// sent twice: not by a retry, not by a new attempt, not by the next drain
// after Run stopped (core NATS has no dedup; JetStream's only covers its
// window). A live subscriber sees every message that went out.
func TestDeleteFailureSendsNothingTwice(t *testing.T) {
	for _, mode := range []string{"jetstream", "core"} {
		t.Run(mode, func(t *testing.T) {
			srv := runServer(t, func(o *server.Options) { o.JetStream = mode == "jetstream" })
			st := &failingDeletes{Store: openStore(t, false)}
			want := entries(1, 50, 2)
			commit(t, st.Store, want)
			st.fail.Store(true)

			msgs := subscribeAll(t, srv.url(), 10*len(want))
			seen := map[string]int{}
			// receive takes what arrives until at least n distinct
			// messages came (a loaded machine delivers late: no quiet
			// spell ends that wait) and then 300 ms pass without one.
			receive := func(n int) {
				for {
					quiet := 300 * time.Millisecond
					if len(seen) < n {
						quiet = 20 * time.Second
					}
					select {
					case m := <-msgs:
						id := m.Header.Get("Nats-Msg-Id")
						if seen[id]++; seen[id] == 2 {
							t.Errorf("%s sent twice", id)
						}
					case <-time.After(quiet):
						return
					}
				}
			}

			p := newPublisher(t, connect(t, srv.url()), st, func(c *publisher.Config) {
				c.BatchSize, c.MaxInFlight = 10, 8
				if mode == "core" {
					c.Stream = ""
				}
			})
			stop := startRun(t, p)
			p.Notify()
			waitFor(t, 20*time.Second, "deletes to fail a few times", func() bool { return st.attempts.Load() >= 4 })
			if p.Ready() == nil {
				t.Error("Ready() = nil while deletes fail")
			}
			receive(1)
			if len(seen) == 0 {
				t.Fatal("nothing was published")
			}
			if mode == "core" && len(seen) > 10 {
				t.Errorf("core mode sent %d entries while the first batch could not be deleted; want one batch (10)", len(seen))
			}
			stop() // the next drain inherits what could not be deleted
			receive(0)

			st.fail.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			receive(len(want))
			if len(seen) != len(want) || st.OutboxDepth() != 0 || p.Published() != uint64(len(want)) {
				t.Errorf("after the disk had room: %d distinct messages of %d, outbox %d, Published %d", len(seen), len(want), st.OutboxDepth(), p.Published())
			}
			if mode == "jetstream" {
				_, js := plainConn(t, srv.url())
				checkStream(t, readStream(t, js, stream), want)
			}
		})
	}
}
