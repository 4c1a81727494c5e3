package plenty_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
)

// TestEveryCallCharged: Client.Calls counts every request that went out
// to the service, over real HTTP: the login, the searches, their retries
// after 500s, 502s and dropped connections, and the login again after the
// service dropped the session (401) — exactly what the simulator counted.
func TestEveryCallCharged(t *testing.T) {
	e := newEnv(t, plentysim.Config{Faults: plentysim.Faults{ServerErrorRate: 0.2, HTMLRate: 0.1, DropRate: 0.1}})
	e.sim.Generate(200, e.clk.Now().Add(-time.Hour), e.clk.Now())
	c := e.client(t, func(c *plenty.Config) { c.Retry.MaxElapsed = 10 * time.Second })
	pages := 0
	for i := range 12 {
		if i == 6 {
			e.sim.ExpireSessions() // the next search is answered 401: login again
		}
		for p, err := range c.Pages(context.Background(), order.Query{ItemsPerPage: 50}) {
			if err != nil {
				t.Fatal(err)
			}
			pages += len(p.Orders) / 50
		}
	}
	st := e.sim.Stats()
	if got := c.Calls(); got != int64(st.Calls) {
		t.Errorf("the client counted %d calls; the service received %d (%d searches, %d logins)", got, st.Calls, st.SearchCalls, st.LoginCalls)
	}
	if st.LoginCalls < 2 || st.FaultsInjected == 0 || int(c.Calls()) <= pages+st.LoginCalls {
		t.Errorf("%d calls for %d pages, %d logins, %d faults: want the logins and the retries counted on top of the pages", c.Calls(), pages, st.LoginCalls, st.FaultsInjected)
	}
	t.Logf("%d pages read with %d calls: %d logins, %d faults retried", pages, c.Calls(), st.LoginCalls, st.FaultsInjected)
}
