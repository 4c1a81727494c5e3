package publisher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/shopid"
)

// TestStreamOwner: the stream records the shop that created or first used
// it (metadata orderwatch.shop); a watcher of another shop is refused,
// naming both shops, instead of publishing into the first shop's stream
// (two shops with default settings shared ORDERS: a standby of one copied
// the other's events).
func TestStreamOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := runServer(t, nil)
	nc := connect(t, srv.url())
	_, js := plainConn(t, srv.url())
	shop := func(id, url string, create bool) *publisher.Publisher {
		p, err := publisher.New(nc, openStore(t, false), publisher.Config{Stream: "ORDERS", CreateStream: create, Shop: id, ShopURL: url, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := func() map[string]string {
		s, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.Metadata
	}

	t.Run("a created stream is the creator's", func(t *testing.T) {
		if err := shop("shop-a", "https://a.example", true).EnsureStream(ctx); err != nil {
			t.Fatal(err)
		}
		if m := meta(); m[publisher.MetaShop] != "shop-a" || m[publisher.MetaShopURL] != "https://a.example" {
			t.Errorf("metadata %v, want shop-a", m)
		}
		if err := shop("shop-a", "https://a.example", true).EnsureStream(ctx); err != nil {
			t.Errorf("the same shop again: %v", err)
		}
	})
	t.Run("another shop is refused, naming both", func(t *testing.T) {
		err := shop("shop-b", "https://b.example", true).EnsureStream(ctx)
		if !errors.Is(err, publisher.ErrOtherShop) || !errors.Is(err, publisher.ErrStream) {
			t.Fatalf("EnsureStream of shop-b: %v, want ErrOtherShop", err)
		}
		for _, s := range []string{"shop-a", "https://a.example", "shop-b", "https://b.example", "WATCHER_STREAM"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("the error does not name %q: %v", s, err)
			}
		}
	})
	t.Run("a stream without an owner is claimed by the first shop", func(t *testing.T) {
		// Another stream keeps the account's store directory non-empty:
		// after a delete, nats-server removes that directory in the
		// background when it is empty, racing a create that follows at
		// once (500 "error creating store for stream" under load). The
		// daemon retries such an error; this test creates the stream once.
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
			t.Fatal(err)
		}
		if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
			t.Fatal(err)
		}
		// As an operator or an earlier version created it.
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute,
			Metadata: map[string]string{"team": "shop"}}); err != nil {
			t.Fatal(err)
		}
		if err := shop("shop-b", "https://b.example", false).EnsureStream(ctx); err != nil {
			t.Fatal(err)
		}
		if m := meta(); m[publisher.MetaShop] != "shop-b" || m["team"] != "shop" {
			t.Errorf("metadata %v, want shop-b's claim beside the operator's", m)
		}
		if err := shop("shop-a", "https://a.example", false).EnsureStream(ctx); !errors.Is(err, publisher.ErrOtherShop) {
			t.Errorf("shop-a after shop-b's claim: %v, want ErrOtherShop", err)
		}
	})
}

// TestShopHeader: every message carries the shop's id in the
// Orderwatch-Shop header (the standbys of other shops skip it without
// decoding), in JetStream and in core NATS mode.
func TestShopHeader(t *testing.T) {
	for _, stream := range []string{"ORDERS", ""} {
		t.Run("stream "+stream, func(t *testing.T) {
			srv := runServer(t, nil)
			msgs := subscribeAll(t, srv.url(), 10)
			st := openStore(t, false)
			p, err := publisher.New(connect(t, srv.url()), st, publisher.Config{Stream: stream, CreateStream: true, Shop: "shop-a", ShopURL: "https://a.example", Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			commit(t, st, entries(1, 2, 1))
			startRun(t, p)
			for range 2 {
				select {
				case m := <-msgs:
					if got := m.Header.Get(shopid.Header); got != "shop-a" {
						t.Errorf("%s: header %s = %q, want shop-a", m.Subject, shopid.Header, got)
					}
				case <-time.After(15 * time.Second):
					t.Fatal("no message")
				}
			}
		})
	}
}

// TestFleetStreamOwner: a stream a fleet owns (StreamOwner) takes every
// shop of that fleet; a single-shop watcher is refused on it, naming the
// fleet.
func TestFleetStreamOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := runServer(t, nil)
	nc := connect(t, srv.url())
	newPub := func(shop, owner string) *publisher.Publisher {
		p, err := publisher.New(nc, openStore(t, false), publisher.Config{Stream: "ORDERS", CreateStream: true, Shop: shop, ShopURL: "https://" + shop + ".example", StreamOwner: owner, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, shop := range []string{"shop-a", "shop-b"} {
		if err := newPub(shop, "fleet orderwatch").EnsureStream(ctx); err != nil {
			t.Errorf("%s of the fleet: %v", shop, err)
		}
	}
	err := newPub("shop-c", "").EnsureStream(ctx)
	if !errors.Is(err, publisher.ErrOtherShop) || !strings.Contains(err.Error(), "fleet orderwatch") {
		t.Errorf("a single-shop watcher on the fleet's stream: %v, want ErrOtherShop naming the fleet", err)
	}
}
