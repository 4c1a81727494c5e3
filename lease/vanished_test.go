package lease_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

func jsOf(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// An operator deletes the lease bucket under a running group: the bucket
// is created again with its TTL, one replica holds the lease again, and
// never two at once (the first holder still runs on its deadline when the
// other finds the bucket gone and creates it).
func TestLeaseBucketDeletedIsCreatedAgain(t *testing.T) {
	s := runServer(t)
	kvA, ttl, _ := conn(t, s)
	kvB, _, _ := conn(t, s)
	a := start(t, kvA, ttl, lease.Config{Instance: "a", Host: "h", Renew: ttl / 2})
	waitFor(t, "a active", 5*time.Second, a.Active)
	b := start(t, kvB, ttl, lease.Config{Instance: "b", Host: "h", Renew: 50 * time.Millisecond})
	// b has seen the bucket (its first attempt) before it is deleted.
	waitFor(t, "b's first attempt", 5*time.Second, func() bool {
		select {
		case <-b.Decided():
			return true
		default:
			return false
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go never(t, a, b, stop, &wg)
	defer func() { close(stop); wg.Wait() }()

	js := jsOf(t, s.ClientURL())
	ctx := context.Background()
	if err := js.DeleteKeyValue(ctx, "test_lease"); err != nil {
		t.Fatal(err)
	}
	holds := func(c *contender) bool {
		v, found, err := c.Holder(ctx)
		return c.Active() && err == nil && found && c.Mine(v)
	}
	waitFor(t, "a replica holding the lease in the bucket created again", 6*ttl, func() bool { return holds(a) || holds(b) })
	holder := a
	if holds(b) {
		holder = b
	}
	waitFor(t, "the holder to be told it is active (OnChange)", ttl, func() bool { return holder.changes.Load()%2 == 1 })
	kv, err := js.KeyValue(ctx, "test_lease")
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.TTL() != ttl {
		t.Errorf("the bucket created again: TTL %v (%v), want %v", st.TTL(), err, ttl)
	}
}

// Without per-key TTL markers (NATS 2.10) the lease still expires: the
// server removes the key TTL after its last renewal, and a standby takes
// it at its next attempt.
func TestLeaseWithoutLimitMarkers(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	bind := func() (jetstream.KeyValue, *nats.Conn) {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		kv, _, err := lease.Bucket(ctx, js, "plain_lease", testTTL, lease.NoLimitMarkers())
		if err != nil {
			t.Fatal(err)
		}
		return kv, nc
	}
	kvA, ncA := bind()
	st, err := kvA.Status(ctx)
	if err != nil || st.(*jetstream.KeyValueBucketStatus).LimitMarkerTTL() != 0 {
		t.Fatalf("bucket status %v: want no limit markers", err)
	}
	a := start(t, kvA, testTTL, lease.Config{Instance: "a", Host: "h"})
	waitFor(t, "a active", 5*time.Second, a.Active)
	kvB, _ := bind()
	b := start(t, kvB, testTTL, lease.Config{Instance: "b", Host: "h"})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go never(t, a, b, stop, &wg)
	kill(ncA, a)
	waitFor(t, "b to take over after the expiry", 4*testTTL, b.Active)
	close(stop)
	wg.Wait()
}

func TestServerFeatures(t *testing.T) {
	js := jsOf(t, runServer(t).ClientURL())
	f, err := lease.Server(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(f.Version, "%d.%d", &major, &minor); err != nil {
		t.Fatalf("server version %q: %v", f.Version, err)
	}
	markers := major > 2 || (major == 2 && minor >= 11)
	if f.LimitMarkers != markers || (len(f.Lacks()) == 0) != markers {
		t.Errorf("features of server %s: %+v, lacks %v; want limit markers %v", f.Version, f, f.Lacks(), markers)
	}
	old := lease.ServerFeatures{Version: "2.10.27"}
	if len(old.Lacks()) == 0 {
		t.Error("a 2.10 server lacks nothing, want limit markers named")
	}
}

// holderAndCheckpoints starts one contender, waits for it to be active and
// binds the checkpoint bucket.
func holderAndCheckpoints(t *testing.T, cfg lease.Config) (*contender, jetstream.KeyValue, jetstream.JetStream) {
	t.Helper()
	s := runServer(t)
	kv, ttl := bucket(t, s)
	a := start(t, kv, ttl, cfg)
	waitFor(t, "a active", 5*time.Second, a.Active)
	js := jsOf(t, s.ClientURL())
	ckv, err := lease.CheckpointBucket(context.Background(), js, "test_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	return a, ckv, js
}

// The checkpoint key or its bucket vanishes or turns to garbage under the
// active replica: its next write (and a successor's that read it before)
// stores a checkpoint again, and a reader sees it.
func TestCheckpointWrittenAgainAfterItVanished(t *testing.T) {
	key := lease.Key("https://shop.example/", "ORDERS")
	ctx := context.Background()
	for _, c := range []struct {
		name string
		do   func(t *testing.T, ckv jetstream.KeyValue, js jetstream.JetStream)
	}{
		{"key deleted", func(t *testing.T, ckv jetstream.KeyValue, _ jetstream.JetStream) {
			if err := ckv.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
		}},
		{"key purged", func(t *testing.T, ckv jetstream.KeyValue, _ jetstream.JetStream) {
			if err := ckv.Purge(ctx, key); err != nil {
				t.Fatal(err)
			}
		}},
		{"value corrupt", func(t *testing.T, ckv jetstream.KeyValue, _ jetstream.JetStream) {
			if _, err := ckv.Put(ctx, key, []byte("{not json")); err != nil {
				t.Fatal(err)
			}
		}},
		{"bucket deleted", func(t *testing.T, _ jetstream.KeyValue, js jetstream.JetStream) {
			if err := js.DeleteKeyValue(ctx, "test_checkpoint"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, ckv, js := holderAndCheckpoints(t, lease.Config{Instance: "a", Host: "h", File: "fa"})
			w := lease.NewCheckpoints(ckv, key)
			if err := w.Write(ctx, a.Lease, 1, "one"); err != nil {
				t.Fatal(err)
			}
			reader := lease.NewCheckpoints(ckv, key)
			if _, _, err := reader.Read(ctx); err != nil {
				t.Fatal(err)
			}
			c.do(t, ckv, js)
			if c.name == "value corrupt" {
				if _, _, err := lease.NewCheckpoints(ckv, key).Read(ctx); !errors.Is(err, lease.ErrCorrupt) {
					t.Errorf("Read of a corrupt value: %v, want ErrCorrupt", err)
				}
			}
			for i, writer := range []*lease.Checkpoints{w, reader} {
				if err := writer.Write(ctx, a.Lease, uint64(2+i), "two"); err != nil {
					t.Fatalf("write %d after the checkpoint vanished: %v", i, err)
				}
			}
			cp, found, err := lease.NewCheckpoints(ckv, key).Read(ctx)
			if err != nil || !found || cp.Seq != 3 || cp.Writer() != a.Writer() || cp.File != "fa" {
				t.Errorf("Read = %+v %v %v; want seq 3 by %+v", cp, found, err, a.Writer())
			}
		})
	}
}

// A checkpoint of another holder: overwritten while the lease is this
// process's on the server (a predecessor's late write); once another
// holds the lease, the write fails with ErrNotWriter and demotes at once.
func TestCheckpointOfAnotherHolder(t *testing.T) {
	ctx := context.Background()
	key := lease.Key("https://shop.example/", "ORDERS")
	// a's clock stands still: its deadline never passes, and its next
	// renewal is an hour away.
	a, ckv, js := holderAndCheckpoints(t, lease.Config{Instance: "a", Host: "h", Renew: time.Hour, Mono: func() time.Duration { return 0 }})
	w := lease.NewCheckpoints(ckv, key)
	if err := w.Write(ctx, a.Lease, 1, "one"); err != nil {
		t.Fatal(err)
	}
	foreign := []byte(`{"epoch":1,"instance":"x","nonce":"x","seq":9,"state":"x"}`)
	if _, err := ckv.Put(ctx, key, foreign); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, a.Lease, 2, "two"); err != nil {
		t.Errorf("write over a predecessor's checkpoint while holding the lease: %v", err)
	}
	// Another replica holds the lease now (a's renewal is an hour away)
	// and wrote its checkpoint.
	lkv, err := js.KeyValue(ctx, "test_lease")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lkv.Put(ctx, key, []byte(`{"instance":"x","nonce":"x"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ckv.Put(ctx, key, foreign); err != nil {
		t.Fatal(err)
	}
	err = w.Write(ctx, a.Lease, 3, "three")
	var fe *lease.ForeignError
	if !errors.Is(err, lease.ErrNotWriter) || !errors.As(err, &fe) || fe.Writer.Instance != "x" {
		t.Errorf("write over another holder's checkpoint: %v, want ErrNotWriter naming x", err)
	}
	if a.Active() || a.changes.Load() != 2 {
		t.Errorf("after ErrNotWriter: active %v, changes %d; want demoted", a.Active(), a.changes.Load())
	}
	if cp, _, _ := lease.NewCheckpoints(ckv, key).Read(ctx); cp.Instance != "x" {
		t.Errorf("the other holder's checkpoint was overwritten: %+v", cp)
	}
}

// The snapshot object store is deleted: the next put creates it again
// with its configuration, and the object is there to read.
func TestObjectStoreDeletedIsCreatedAgain(t *testing.T) {
	js := jsOf(t, runServer(t).ClientURL())
	ctx := context.Background()
	obs, err := lease.ObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: "test_snapshot", Description: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "k"}, bytes.NewReader([]byte("one"))); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteObjectStore(ctx, "test_snapshot"); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(ctx, "k"); err == nil {
		t.Error("the object outlived its store")
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: "k"}, bytes.NewReader([]byte("two"))); err != nil {
		t.Fatalf("put after the store was deleted: %v", err)
	}
	res, err := obs.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	b, err := io.ReadAll(res)
	if err != nil || string(b) != "two" {
		t.Errorf("read back %q, %v; want two", b, err)
	}
	st, err := obs.Status(ctx)
	if err != nil || st.Description() != "d" {
		t.Errorf("the store created again: %v %v; want its description", st, err)
	}
}
