package kvwatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/kvwatch"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestRunHandsWhatItIsAskedFor, against a real bucket: without UpdatesOnly
// a watch hands nil (forget what was handed), the current values, then
// each change; with UpdatesOnly and a key filter, only the changes of the
// keys filtered, from when the watch opened. Each watch ends with its
// context.
func TestRunHandsWhatItIsAskedFor(t *testing.T) {
	js := testnats.JetStream(t, testnats.Start(t).ClientURL())
	ctx := t.Context()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "kvwatch"})
	if err != nil {
		t.Fatal(err)
	}
	put := func(k, v string) {
		t.Helper()
		if _, err := kv.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	put("a.limits", "1")
	put("b", "2")

	all, allDone := watch(ctx, kv, kvwatch.Options{})
	limits, limitsDone := watch(ctx, kv, kvwatch.Options{Keys: "*.limits", UpdatesOnly: true})
	expect(t, "every key", all, "<nil>", "a.limits=1", "b=2")
	put("b", "3")
	expect(t, "every key", all, "b=3")
	// The updates-only watch opened at some point before: written until
	// it hands a change.
	testnats.WaitFor(t, "the updates-only watch to hand a change", 30*time.Second, func() bool {
		put("a.limits", "4")
		select {
		case got := <-limits:
			if got != "a.limits=4" {
				t.Fatalf("the updates-only watch handed %s, want a.limits=4", got)
			}
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	put("b", "5")
	put("a.limits", "6")
	for got := ""; got != "a.limits=6"; {
		select {
		case got = <-limits:
			if got != "a.limits=4" && got != "a.limits=6" { // 4: a second write while waiting
				t.Fatalf("the updates-only watch of *.limits handed %s", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the updates-only watch did not hand a.limits=6")
		}
	}
	allDone()
	limitsDone()
}

// watch runs Run until the returned stop, which waits for it to end; the
// entries come out as key=value, nil as <nil>.
func watch(ctx context.Context, kv jetstream.KeyValue, o kvwatch.Options) (<-chan string, func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		kvwatch.Run(ctx, kv, o, func(e jetstream.KeyValueEntry) {
			if e == nil {
				out <- "<nil>"
				return
			}
			out <- e.Key() + "=" + string(e.Value())
		})
	}()
	return out, func() { cancel(); <-done }
}

// expect reads the next entries of ch and wants them in order.
func expect(t *testing.T, what string, ch <-chan string, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-ch:
			if got != w {
				t.Fatalf("watch of %s handed %s, want %s", what, got, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch of %s handed nothing, want %s", what, w)
		}
	}
}
