package events_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/schemas"
)

// A message as orderwatch publishes it: the status_changed example of the
// schema, with its headers.
func ExampleDecode() {
	ex, _ := schemas.Examples()
	data := ex["order.status_changed"][0]
	header := nats.Header{"Content-Type": {"application/cloudevents+json"}, "Nats-Msg-Id": {"e84c5755c97653538e7ace2d7cbad8cd"}}

	ev, err := events.Decode(header, data) // events.FromMsg(msg) for a jetstream.Msg
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ev.Type, "of order", ev.OrderID(), "at", ev.Time.Format(time.RFC3339))
	fmt.Println("status", ev.Data.Before.StatusID, "->", ev.Data.After.StatusID, "lock", ev.Data.After.LockStatus)
	fmt.Println("owner null:", ev.Data.After.OwnerID == "", "entered 5.1:", ev.Entered("5.1"))
	fmt.Println("NATS subject:", events.DefaultPrefix.Of(ev))
	// Output:
	// order.status_changed of order 2302 at 2026-11-22T10:02:41+01:00
	// status 5 -> 5.1 lock permanentlyLocked
	// owner null: true entered 5.1: true
	// NATS subject: orders.status_changed.5.5_1.2302
}

// First sight: before is null, so Data.Before is nil.
func ExampleEvent_FirstSight() {
	ex, _ := schemas.Examples()
	ev, _ := events.Unmarshal(ex["order.discovered"][0])
	fmt.Println(ev.Type, ev.FirstSight(), ev.Data.Before == nil, ev.Status())
	// Output: order.discovered true true 11.1
}

// The filters a consumer subscribes with (a consumer's FilterSubject or
// FilterSubjects).
func ExamplePrefix() {
	p := events.DefaultPrefix // WATCHER_SUBJECT_PREFIX, "orders" by default
	fmt.Println(p.All())
	fmt.Println(p.Into("8"))
	fmt.Println(p.OutOf("5.1"))
	fmt.Println(p.Transition("5", "6"))
	fmt.Println(p.Type(events.Created))
	fmt.Println(p.Order(1042))
	fmt.Println(events.Prefix("shop1.orders").All())
	// Output:
	// orders.>
	// orders.status_changed.*.8.*
	// orders.status_changed.5_1.*.*
	// orders.status_changed.5.6.*
	// orders.created.*
	// [orders.*.1042 orders.status_changed.*.*.1042]
	// shop1.orders.>
}

func ExamplePrefix_Parse() {
	s, err := events.DefaultPrefix.Parse("orders.status_changed.none.7_01.2310")
	fmt.Printf("%s of %d: from %q to %q, %v\n", s.Type, s.OrderID, s.From, s.To, err)
	// Output: order.status_changed of 2310: from "" to "7.01", <nil>
}

func ExampleStatusToken() {
	for _, s := range []events.Decimal{"5", "5.1", "7.10", ""} {
		fmt.Printf("%q -> %s\n", s, events.StatusToken(s))
	}
	// Output:
	// "5" -> 5
	// "5.1" -> 5_1
	// "7.10" -> 7_1
	// "" -> none
}

// Handle each event once: the second delivery of the same event id (a
// redelivery, a replay) is recognised and skipped.
func ExampleOnce() {
	ctx := context.Background()
	seen := events.NewMemory(100_000, 24*time.Hour, nil)
	for _, id := range []string{"e84c5755c97653538e7ace2d7cbad8cd", "d955f21a28808aa9e85f3a5ff10d389f", "e84c5755c97653538e7ace2d7cbad8cd"} {
		err := events.Once(ctx, seen, id, func(context.Context) error {
			fmt.Println("handling", id)
			return nil
		})
		if err != nil {
			fmt.Println(err) // leave the message unacknowledged: it comes again
		}
	}
	// Output:
	// handling e84c5755c97653538e7ace2d7cbad8cd
	// handling d955f21a28808aa9e85f3a5ff10d389f
}

func ExampleEvent_String() {
	ex, _ := schemas.Examples()
	for _, typ := range schemas.Types {
		ev, _ := events.Unmarshal(ex[typ][0])
		fmt.Println(ev)
	}
	// Output:
	// order.created order 2301: in status 5
	// order.status_changed order 2302: 5 -> 5.1
	// order.lock_changed order 2302: lock reversibleLocked -> permanentlyLocked
	// order.discovered order 2307: in status 11.1
	// order.updated order 2302: updated at 2026-11-22T10:02:41+01:00
}

// Apply an order's events in order, also when a redelivery comes late:
// keep a Latest per order. Two events with the same updatedAt (here the
// schema's status and lock change of order 2302) are both applied; a copy
// is not.
func ExampleLatest() {
	ex, _ := schemas.Examples()
	status, _ := events.Unmarshal(ex["order.status_changed"][0])
	lock, _ := events.Unmarshal(ex["order.lock_changed"][0])
	var stored events.Latest // kept with the order's state
	for _, ev := range []events.Event{status, lock, status} {
		if !stored.Newer(ev) {
			fmt.Println("skip", ev)
			continue
		}
		fmt.Println("apply", ev)
		stored = stored.Add(ev)
	}
	// Output:
	// apply order.status_changed order 2302: 5 -> 5.1
	// apply order.lock_changed order 2302: lock reversibleLocked -> permanentlyLocked
	// skip order.status_changed order 2302: 5 -> 5.1
}
