package mirror_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// TestFirstSyncCheckpointNeedsItsDump: the checkpoint that says the first
// sync is done is written only after the dump of the snapshot that sync
// recorded (the baseline is in no event of the stream). When the dump
// fails, no such checkpoint becomes the group's: a replica taking over
// does its own first sync instead of restoring an empty snapshot as
// complete, which published every order as discovered (seen in fleet
// mode when a dump timed out under load).
func TestFirstSyncCheckpointNeedsItsDump(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// A dump bucket too small for any dump: every dump fails.
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "t_snapshot", MaxBytes: 64}); err != nil {
		t.Fatal(err)
	}
	a := newReplica(t, s, "a")
	waitFor(t, "a active", 5*time.Second, a.lease.Active)
	if _, err := a.m.Takeover(ctx, a.lease, true); err != nil {
		t.Fatal(err)
	}
	ckv, err := js.KeyValue(ctx, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	baselineDone := func() bool {
		cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
		if err != nil || !found {
			return false
		}
		return strings.Contains(string(cp.State), `"baselineDone":true`)
	}
	recordBaseline(t, a)
	if ok, err := a.m.Committed(ctx, a.lease); err == nil || ok {
		t.Errorf("Committed with a failing dump: %v, %v; want no checkpoint and the dump's error", ok, err)
	}
	if baselineDone() {
		t.Fatal("the group's checkpoint says the first sync is done, but no dump holds its snapshot")
	}
}
