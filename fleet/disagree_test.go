package fleet

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/shopid"
)

// writeRegistry replaces the world's registry file (a rename, as a
// Secret's update) with the entries given.
func (w *world) writeRegistry(entries ...string) {
	w.t.Helper()
	tmp := w.registry + ".tmp"
	if err := os.WriteFile(tmp, []byte(`{"shops":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.registry); err != nil {
		w.t.Fatal(err)
	}
}

// entry is a registry entry of the simulator's tenant with this id.
func (w *world) entry(id, tenant, pwEnv string) string {
	return fmt.Sprintf(`{"id":%q,"url":%q,"username":"demo","passwordEnv":%q}`, id, w.simURL+plentysim.TenantPath(tenant), pwEnv)
}

// TestShopOnlyOneMemberCanRunStaysThere: two members disagree about one
// entry (its passwordEnv is set on m0 only). m0 runs both shops alone;
// m1 joins: m0 gives m1 the shop m1 can run and keeps the other, even
// though that one is the shop m0 prefers least (before: m0 gave it up,
// nobody took it, and it was taken and dropped again every ~21 s).
func TestShopOnlyOneMemberCanRunStaysThere(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2)
	ids := w.sim.IDs()
	bad, good := ids[0], ids[1]
	if cmpScore(score(bad, "m0"), score(good, "m0")) > 0 {
		bad, good = good, bad // m0 prefers bad least: the one it gave up before
	}
	w.writeRegistry(w.entry(bad, bad, "ONLY_M0"), w.entry(good, good, "SHOP_PW"))
	m0 := w.startWith("m0", map[string]string{"SHOP_PW": "demo", "ONLY_M0": "demo"})
	waitStable(t, []*member{m0}, 2, 60*time.Second)

	m1 := w.startWith("m1", map[string]string{"SHOP_PW": "demo"})
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		if act := m0.active(); len(act) == 0 || !slices.Contains(act, bad) {
			t.Fatalf("shop %s, which only m0 can run, is not active on m0 (m0 runs %v; m0: %s; m1: %s)", bad, act, m0.f.Report().Holders(), m1.f.Report().Holders())
		}
		time.Sleep(100 * time.Millisecond)
	}
	testnats.WaitForEvery(t, "m1 running the shop it can run", 60*time.Second, 100*time.Millisecond, func() bool {
		act := m1.active()
		return len(act) == 1 && act[0] == good
	})
	if act := m0.active(); len(act) != 1 || act[0] != bad {
		t.Errorf("m0 runs %v, want %s only", act, bad)
	}
}

// TestTwoEntriesOnOneURLAfterARestart: a shop ran alone under the id a
// single-shop release derived from its URL and is checkpointed; the
// fleet restarts with a second entry on the same URL. The second shop
// has no checkpoint under its own key; it must not take the first shop's
// group (its earlier-version key, lease.Key of the URL, is the first
// shop's key): each runs on its own lease.
func TestTwoEntriesOnOneURLAfterARestart(t *testing.T) {
	w := newWorld(t, 1)
	tenant := w.sim.IDs()[0]
	url := w.simURL + plentysim.TenantPath(tenant)
	first := shopid.FromURL(url)
	if lease.Key(url, "ORDERS") != lease.Key(first, "ORDERS") {
		t.Fatalf("the test needs the URL's key (%s) to be the first shop's (%s)", lease.Key(url, "ORDERS"), lease.Key(first, "ORDERS"))
	}
	w.writeRegistry(w.entry(first, tenant, "SHOP_PW"))
	m0 := w.start("m0")
	waitStable(t, []*member{m0}, 1, 60*time.Second)
	testnats.WaitForEvery(t, "the first shop's checkpoint", 30*time.Second, 100*time.Millisecond, func() bool {
		kv, err := w.js.KeyValue(context.Background(), "orderwatch_checkpoint")
		if err != nil {
			return false
		}
		_, err = kv.Get(context.Background(), lease.Key(first, "ORDERS"))
		return err == nil
	})
	m0.cancel()
	<-m0.done

	w.writeRegistry(w.entry(first, tenant, "SHOP_PW"), w.entry("second", tenant, "SHOP_PW"))
	m1 := w.start("m1")
	waitStable(t, []*member{m1}, 2, 30*time.Second)
	kv, err := w.js.KeyValue(context.Background(), "orderwatch_lease")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{first, "second"} {
		e, err := kv.Get(context.Background(), lease.Key(id, "ORDERS"))
		if err != nil {
			t.Errorf("shop %s: no lease under its own key: %v", id, err)
			continue
		}
		if !strings.Contains(string(e.Value()), `"instance":"m1"`) {
			t.Errorf("shop %s: lease %s, want m1's", id, e.Value())
		}
	}
}
