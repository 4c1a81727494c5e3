package replica_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// loopingPipeline searches the shop at url in a loop with a client built
// from the state file at the tenure's start, and applies the group's
// waits to that client (replica.LimitsApplier).
func loopingPipeline(t *testing.T, url string) *pipeline {
	var client atomic.Pointer[plenty.Client]
	return &pipeline{
		onStart: func(ctx context.Context, st *state.Store) {
			c, err := plenty.New(plenty.Config{BaseURL: url, Username: "demo", Password: "demo", Tokens: st, Sessions: st, Waits: st})
			if err != nil {
				t.Error(err)
				return
			}
			client.Store(c)
			for ctx.Err() == nil {
				_, _ = c.SearchOrders(ctx, order.Query{ItemsPerPage: 1})
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
		},
		onLimits: func(st *state.Store) {
			if c := client.Load(); c != nil {
				waits, _, _ := plenty.LoadWaits(st)
				c.Pacer().Restore(waits...)
			}
		},
	}
}

// TestWaitAddedByAnotherReplicaBindsTheActive: during a's tenure another
// replica (one past its deadline, whose call was answered 429 late)
// writes a wait to the group's limits: a, calling in a loop, makes no
// call from shortly after then until the wait ends.
func TestWaitAddedByAnotherReplicaBindsTheActive(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	sim := plentysim.New(plentysim.Config{Seed: 1})
	sim.Generate(5, time.Now().Add(-time.Hour), time.Now().Add(-time.Minute))
	var mu sync.Mutex
	var calls []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	a := g.start("a", loopingPipeline(t, srv.URL))
	waitFor(t, "a calling", func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) > 3 && a.working() })

	// x's write, as its replica writes it: merged over the group's value.
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	until := now.Add(3 * time.Second)
	waits, _ := json.Marshal(map[string][]plenty.Wait{"waits": {{Until: until, Reason: plenty.WaitThrottled, Why: "429 answered to x late", Measured: now, Announced: 3 * time.Second}}})
	v, _ := json.Marshal(map[string]any{"writer": lease.Writer{Instance: "x", Nonce: "x"}, "written": now.UTC(), "records": map[string]json.RawMessage{plenty.WaitsRecord: waits}})
	if _, err := kv.Put(context.Background(), g.key+".limits", v); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	waitFor(t, "the wait's end", func() bool { return time.Now().After(until.Add(500 * time.Millisecond)) })
	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		if c.After(written.Add(news)) && c.Before(until) {
			t.Errorf("a called at %s, inside the wait x wrote to the group at %s (until %s)", c.Format("15:04:05.000"), written.Format("15:04:05.000"), until.Format("15:04:05.000"))
			break
		}
	}
}
