package plenty_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
)

// A client whose gate refuses sends nothing: no login, no search, no
// retry; once the gate opens it works as usual.
func TestGateHoldsEveryRequest(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	e.sim.Generate(5, e.clk.Now().Add(-time.Hour), e.clk.Now())
	var open atomic.Bool
	notActive := errors.New("standby")
	c := e.client(t, func(cfg *plenty.Config) {
		cfg.Gate = func() error {
			if open.Load() {
				return nil
			}
			return notActive
		}
	})
	if _, err := c.SearchOrders(context.Background(), order.Query{}); !errors.Is(err, plenty.ErrFenced) || !errors.Is(err, notActive) {
		t.Errorf("SearchOrders through a closed gate: %v; want ErrFenced wrapping the gate's error", err)
	}
	if err := c.Login(context.Background()); !errors.Is(err, plenty.ErrFenced) {
		t.Errorf("Login through a closed gate: %v", err)
	}
	if st := e.sim.Stats(); st.LoginCalls != 0 || st.SearchCalls != 0 {
		t.Errorf("%d logins, %d searches reached the service through a closed gate", st.LoginCalls, st.SearchCalls)
	}
	open.Store(true)
	if p := search(t, c, order.Query{}); p.TotalsCount != 5 {
		t.Errorf("after the gate opened: %d orders", p.TotalsCount)
	}
}
