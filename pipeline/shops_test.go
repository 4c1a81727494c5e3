package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestSecondShopOnDefaultsRefused: two shops with default settings on
// one NATS would share the stream ORDERS and its subjects; the second
// shop's watcher refuses to start (a configuration error, exit 2), naming
// both shops and what to set.
func TestSecondShopOnDefaultsRefused(t *testing.T) {
	nats := testnats.Start(t).ClientURL()
	a, err := New(testConfig(t, "http://a.example", nats), Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(testConfig(t, "http://b.example", nats), Options{Logger: quiet()})
	if err == nil {
		b.Close()
		t.Fatal("shop b started on shop a's stream")
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("%v: want a configuration error", err)
	}
	for _, s := range []string{"a_example", "http://a.example", "b_example", "http://b.example", "WATCHER_STREAM", "WATCHER_SHOP_ID=a_example"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not name %q: %v", s, err)
		}
	}
}

// TestShopIDKeepsItsGroupAcrossURLs: a shop is its id (WATCHER_SHOP_ID):
// a watcher of the same id under another URL (the shop's new domain) joins
// the group instead of being refused; the replica logs the change
// (replica.TestShopURLChangeWithExplicitShopID).
func TestShopIDKeepsItsGroupAcrossURLs(t *testing.T) {
	nats := testnats.Start(t).ClientURL()
	cfg := func(url string) *Config {
		c := testConfig(t, url, nats)
		c.ShopID, c.Lease, c.LeaseTTL = "shop", true, 2*time.Second
		return c
	}
	a, err := New(cfg("http://127.0.0.1:1"), Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e2e.WaitFor(t, "a holding the lease", 60*time.Second, a.rep.Active)
	b, err := New(cfg("http://127.0.0.2:1"), Options{Logger: quiet()})
	if err != nil {
		t.Fatalf("the shop under its new URL refused: %v", err)
	}
	b.Close()
}
