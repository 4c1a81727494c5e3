package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/examples/internal/fixture"
)

func noEnv(string) string { return "" }

// TestRestartRedeliversWhatWasNotAcknowledged: the consumer handles three
// events, stops on the fourth without acknowledging it (a crash), and is
// started again under the same durable name: the fourth is delivered again
// (a second delivery), the rest follow, none of the first three comes
// again, none is skipped.
func TestRestartRedeliversWhatWasNotAcknowledged(t *testing.T) {
	url, js := fixture.Start(t)
	var ids []string
	for i := range 6 {
		ev := fixture.StatusChanged(int64(1000+i), "5", "6", i)
		fixture.Publish(t, js, ev, true)
		ids = append(ids, ev.ID)
	}
	// One event the filter leaves out.
	fixture.Publish(t, js, fixture.Created(2000, "3", 9), true)
	victim := ids[3]
	args := []string{"-nats", url, "-durable", "restart-test", "-ack-wait", "1s", "-filter", "orders.status_changed.>"}

	// First run: crashes at the victim.
	c, err := parse(args, noEnv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	first := map[string]bool{}
	c.handled = func(ev events.Event, _ *jetstream.MsgMetadata) { first[ev.ID] = true }
	c.crash = func(ev events.Event) bool { return ev.ID == victim }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := consumeEvents(ctx, c, io.Discard); err != nil || ctx.Err() != nil {
		t.Fatalf("first run: %v, %v", err, ctx.Err())
	}
	if want := ids[:3]; !slices.Equal(slices.Sorted(maps.Keys(first)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("first run acknowledged %v, want %v", first, want)
	}

	cons, err := js.Consumer(ctx, fixture.Stream, "restart-test")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := info.Config; cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.AckWait != time.Second || cfg.MaxAckPending != 1000 ||
		!slices.Equal(cfg.FilterSubjects, []string{"orders.status_changed.>"}) {
		t.Errorf("consumer config: ack %v, wait %v, max ack pending %d, filters %v", cfg.AckPolicy, cfg.AckWait, cfg.MaxAckPending, cfg.FilterSubjects)
	}

	// Second run: everything else, the victim delivered again.
	c, _ = parse(args, noEnv, &bytes.Buffer{})
	second := map[string]uint64{}
	ctx2, cancel2 := context.WithCancel(ctx)
	defer cancel2()
	c.handled = func(ev events.Event, meta *jetstream.MsgMetadata) {
		second[ev.ID] = meta.NumDelivered
		if len(first)+len(second) >= len(ids) {
			cancel2()
		}
	}
	out := &bytes.Buffer{}
	if err := consumeEvents(ctx2, c, out); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("second run did not get every event: first %v, second %v", first, second)
	}
	for _, id := range ids[:3] {
		if _, again := second[id]; again {
			t.Errorf("acknowledged event %s delivered again", id)
		}
	}
	for _, id := range ids[3:] {
		if _, ok := second[id]; !ok {
			t.Errorf("event %s skipped", id)
		}
	}
	if second[victim] < 2 {
		t.Errorf("the unacknowledged event was delivered %d times, want a redelivery", second[victim])
	}
	if !strings.Contains(out.String(), fmt.Sprintf("delivery %d: order.status_changed order 1003: 5 -> 6 (id %s)", second[victim], victim)) {
		t.Errorf("output:\n%s", out)
	}
	if strings.Contains(out.String(), "order.created") {
		t.Errorf("the filter let an order.created through:\n%s", out)
	}
}
