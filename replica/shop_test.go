package replica_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/replica"
)

// TestUpgradeKeepsTheLegacyKey: a group of an earlier version keys its
// lease, checkpoint and dump by the service URL (lease.Key(URL, stream));
// with an explicit shop id the new key differs. A replica of the new
// version that joins during a rolling update must find the old active's
// lease (not take a second one under its new key) and, after the old
// active dies, continue from its checkpoint.
func TestUpgradeKeepsTheLegacyKey(t *testing.T) {
	g := newGroup(t)
	legacy, key := lease.Key(shop, stream), lease.Key("shop-a", stream)
	g.configure = func(name string, c *replica.Config) {
		if name == "b" { // the new version; a is the earlier one (Key = the legacy key)
			c.Key, c.LegacyKey, c.Shop, c.ShopURL = key, legacy, "shop-a", shop
		}
	}
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm) // under g.key, the legacy key
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring && b.rep.Status().Holder == "a" })
	if b.working() || b.rep.Key() != legacy {
		t.Fatalf("b works %v with key %q while a holds the legacy key %q", b.working(), b.rep.Key(), legacy)
	}
	a.kill()
	waitFor(t, "b active", b.working)
	if m, err := b.store.Meta(); err != nil || !m.Watermark.Equal(wm) {
		t.Errorf("b's watermark after the takeover: %v (%v), want a's checkpoint %v", m.Watermark, err, wm)
	}
	if got, err := replica.GroupKey(context.Background(), b.nc, g.bucket, key, legacy, "shop-a"); err != nil || got != legacy {
		t.Errorf("GroupKey = %q, %v; want the legacy key", got, err)
	}
}

// TestNewGroupUsesTheShopKey: without state under the legacy key a group
// uses the key named by its shop id.
func TestNewGroupUsesTheShopKey(t *testing.T) {
	g := newGroup(t)
	key := lease.Key("shop-a", stream)
	g.configure = func(_ string, c *replica.Config) { c.Key, c.LegacyKey = key, lease.Key(shop, stream) }
	g.key = key
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	if a.rep.Key() != key {
		t.Errorf("key %q, want %q", a.rep.Key(), key)
	}
}

// TestOtherShopRefused: two shops given the same shop id share a key; the
// second one's replica refuses to join the first one's group (no mirror,
// no call), naming both shops.
func TestOtherShopRefused(t *testing.T) {
	g := newGroup(t)
	g.configure = func(name string, c *replica.Config) {
		c.ShopURL = "https://" + name + ".example"
	}
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	b := g.start("b", &pipeline{})
	waitFor(t, "b refusing", func() bool { return strings.Contains(b.rep.Status().SetupErr, "https://b.example") })
	st := b.rep.Status()
	if !strings.Contains(st.SetupErr, "https://a.example") || st.Mirroring || b.working() {
		t.Errorf("b: %+v, want a refusal naming both shops, no mirror, no work", st)
	}
	if !strings.Contains(b.logs.String(), "refusing to join the group of another shop") {
		t.Errorf("b's log does not say it refuses:\n%s", b.logs)
	}
	err := replica.CheckOwner(context.Background(), b.nc, g.bucket, g.key, replica.Owner{URL: "https://b.example"})
	if !errors.Is(err, replica.ErrShopConflict) {
		t.Errorf("CheckOwner: %v, want ErrShopConflict", err)
	}
	if err := replica.CheckOwner(context.Background(), b.nc, g.bucket, g.key, replica.Owner{URL: "HTTPS://A.example/"}); err != nil {
		t.Errorf("CheckOwner of the same shop: %v", err)
	}
}

// TestOtherShopsCheckpointRefused: with nobody holding the lease, the
// group's checkpoint still names its shop: a replica of another shop under
// the same key refuses to continue from it.
func TestOtherShopsCheckpointRefused(t *testing.T) {
	g := newGroup(t)
	g.configure = func(name string, c *replica.Config) { c.ShopURL = "https://" + name + ".example" }
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	a.stop()
	if cp, _ := g.checkpoint(); cp.Shop != "https://a.example" {
		t.Fatalf("a's checkpoint names the shop %q", cp.Shop)
	}
	b := g.start("b", &pipeline{})
	waitFor(t, "b refusing", func() bool { return strings.Contains(b.rep.Status().SetupErr, "https://a.example") })
	if b.working() || b.rep.Status().Mirroring {
		t.Errorf("b works or mirrors in shop a's group: %+v", b.rep.Status())
	}
	if m, _ := b.store.Meta(); !m.Watermark.IsZero() {
		t.Errorf("b took shop a's watermark %v", m.Watermark)
	}
}

// TestLegacyKeyOfAnotherShopIsNotTaken: in a fleet, two entries on one
// URL are two shops, and one shop's earlier-version key (lease.Key of
// the URL) may be the other shop's own key. A group under it that names
// another shop id is that shop's: GroupKey keeps this shop's own key.
func TestLegacyKeyOfAnotherShopIsNotTaken(t *testing.T) {
	g := newGroup(t)
	legacy, key := lease.Key(shop, stream), lease.Key("shop-b", stream)
	g.configure = func(name string, c *replica.Config) {
		if name == "a" { // shop-a, whose own key is the legacy key of shop-b
			c.Key, c.Shop = legacy, "shop-a"
		}
	}
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	for _, tc := range []struct{ shop, want string }{{"shop-b", key}, {"shop-a", legacy}, {"", legacy}} {
		got, err := replica.GroupKey(context.Background(), a.nc, g.bucket, key, legacy, tc.shop)
		if err != nil || got != tc.want {
			t.Errorf("GroupKey for shop %q = %q, %v; want %q", tc.shop, got, err, tc.want)
		}
	}
}
