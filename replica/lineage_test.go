package replica_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/replica"
)

// copyFile copies the state file at src to dst (a cloned volume, a
// backup taken while it ran).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCopyOfTheStateFileRestoresFromTheGroup: a copy of the active's state
// file taken during its tenure (a cloned volume, a restored backup)
// carries that tenure's record; after the active dies, a replica started
// on the copy must not take the group's newer checkpoint for its own
// tenure: it restores from it (and says so) instead of working from the
// copy's older watermark.
func TestCopyOfTheStateFileRestoresFromTheGroup(t *testing.T) {
	g := newGroup(t)
	wm1 := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm1)
	copied := filepath.Join(t.TempDir(), "copy.db")
	copyFile(t, a.store.Path(), copied)

	wm2 := g.advance(a, wm1.Add(time.Hour))
	a.kill()
	waitFor(t, "a's lease expired", g.leaseFree)

	g.configure = func(name string, c *replica.Config) { c.Instance = "a" }
	c := g.startOn("a-copy", copied, &pipeline{})
	waitFor(t, "the copy active", c.working)
	if m, err := c.store.Meta(); err != nil || !m.Watermark.Equal(wm2) {
		t.Errorf("the copy works from the watermark %v (%v), want the group's %v", m.Watermark, err, wm2)
	}
	if !strings.Contains(c.logs.String(), "copy") {
		t.Errorf("the copy does not say it is one:\n%s", c.logs.String())
	}
}

// leaseFree says whether nobody holds the group's lease.
func (g *group) leaseFree() bool {
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_lease")
	if err != nil {
		return false
	}
	_, err = kv.Get(context.Background(), g.key)
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// TestShopURLChangeWithExplicitShopID: the group of an explicit shop id
// recorded the service's URL; its replicas restarted with a new URL of
// the same shop (WATCHER_SHOP_ID unchanged) join the group and continue,
// saying so in the log and the state report.
func TestShopURLChangeWithExplicitShopID(t *testing.T) {
	g := newGroup(t)
	url := "https://old.example"
	g.configure = func(name string, c *replica.Config) { c.Shop, c.ShopURL = "shop-a", url }
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.stop()
	b.stop()

	url = "https://new.example"
	b2 := g.start("b2", &pipeline{})
	waitFor(t, "b2 active under the new URL", b2.working)
	if m, err := b2.store.Meta(); err != nil || !m.Watermark.Equal(wm) {
		t.Errorf("b2's watermark %v (%v), want the group's %v", m.Watermark, err, wm)
	}
	if !strings.Contains(b2.logs.String(), "old.example") {
		t.Errorf("the URL change is not logged:\n%s", b2.logs.String())
	}
	if rep := b2.rep.Report(); rep.ShopURLBefore != "https://old.example" {
		t.Errorf("state report: shop URL before %q, want the old URL", rep.ShopURLBefore)
	}
}

// TestShopURLChangeWithoutShopIDNamesTheFix: with the shop id derived
// from the URL, a group under the same key whose owner has another URL is
// refused, and the refusal names WATCHER_SHOP_ID as the fix of a URL
// change.
func TestShopURLChangeWithoutShopIDNamesTheFix(t *testing.T) {
	g := newGroup(t)
	url := "https://old.example"
	g.configure = func(name string, c *replica.Config) { c.ShopURL = url }
	g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	url = "https://new.example"
	b := g.start("b", &pipeline{})
	waitFor(t, "b refusing", func() bool { return strings.Contains(b.logs.String(), "refusing to join") })
	if l := b.logs.String(); !strings.Contains(l, "WATCHER_SHOP_ID=old_example") {
		t.Errorf("the refusal does not name the fix for a URL change (WATCHER_SHOP_ID=old_example):\n%s", l)
	}
}
