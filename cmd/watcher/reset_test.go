package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestResetCommand: `watcher reset` refuses (exit 1, naming the holder)
// while a replica holds the group's lease, and with -force -lease clears
// the checkpoint and the lease of the shop's key, warning that a holder
// still running undoes the reset.
func TestResetCommand(t *testing.T) {
	setBase(t)
	ns := testnats.Start(t)
	t.Setenv("WATCHER_NATS_URL", ns.ClientURL())
	t.Setenv("WATCHER_SHOP_ID", "shop-a")
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	for bucket, value := range map[string]string{"orderwatch_lease": `{"instance":"orderwatch-1","host":"node-2"}`, "orderwatch_checkpoint": `{"state":{}}`} {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, "shop-a.ORDERS", []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"reset"}, &out, &errOut); code != exitFail || !strings.Contains(errOut.String(), "orderwatch-1 (host node-2) holds the lease shop-a.ORDERS") {
		t.Fatalf("reset while a replica is active: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run(ctx, []string{"reset", "-force", "-lease"}, &out, &errOut); code != exitOK ||
		!strings.Contains(out.String(), "checkpoints cleared: shop-a.ORDERS;") || !strings.Contains(out.String(), "leases cleared: shop-a.ORDERS") ||
		!strings.Contains(errOut.String(), "orderwatch-1 held the lease: if it runs, its next checkpoint") {
		t.Errorf("reset -force -lease: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}
