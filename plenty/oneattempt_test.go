package plenty_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
)

// Under OneAttempt a failure the client would retry with backoff (here a
// 500, and a body cut short) is returned after one search; without it the
// same failure is retried.
func TestOneAttemptReturnsTheFirstFailure(t *testing.T) {
	for name, f := range map[string]plentysim.Faults{
		"500":       {ServerErrorRate: 1},
		"truncated": {TruncateRate: 1},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, plentysim.Config{})
			c := e.client(t, func(c *plenty.Config) { c.Retry.MaxElapsed = 100 * time.Millisecond })
			search(t, c, order.Query{}) // logged in
			e.sim.SetFaults(f)

			before := e.sim.Stats().SearchCalls
			_, err := c.SearchOrders(plenty.OneAttempt(context.Background()), order.Query{})
			if err == nil {
				t.Fatal("no error")
			}
			if n := e.sim.Stats().SearchCalls - before; n != 1 {
				t.Errorf("%d searches under OneAttempt, want 1 (%v)", n, err)
			}
			var apiErr *plenty.APIError
			if name == "500" && (!errors.As(err, &apiErr) || apiErr.Status != 500) {
				t.Errorf("error %v: want the service's 500", err)
			}

			before = e.sim.Stats().SearchCalls
			if _, err := c.SearchOrders(context.Background(), order.Query{}); err == nil {
				t.Fatal("no error")
			}
			if n := e.sim.Stats().SearchCalls - before; n < 2 {
				t.Errorf("%d searches without OneAttempt: the failure was not retried", n)
			}
		})
	}
}
