package consume_test

import (
	"context"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events/consume"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

func TestFlagsDefaultToTheWatchersVariables(t *testing.T) {
	env := map[string]string{"NATS_URL": "nats://b:4222", "WATCHER_NATS_URL": "nats://a:4222", "WATCHER_STREAM": "SHOP1", "WATCHER_SUBJECT_PREFIX": "orders.berlin"}
	for _, tc := range []struct {
		env                  map[string]string
		args                 []string
		url, stream, filters string
	}{
		{nil, nil, nats.DefaultURL, "ORDERS", "orders.>"},
		{env, nil, "nats://a:4222", "SHOP1", "orders.berlin.>"},
		{map[string]string{"NATS_URL": "nats://b:4222"}, nil, "nats://b:4222", "ORDERS", "orders.>"},
		{env, []string{"-nats", "nats://c:4222", "-stream", "S", "-prefix", "x.y"}, "nats://c:4222", "S", "x.y.>"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c := consume.Flags(fs, func(k string) string { return tc.env[k] })
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if c.URL != tc.url || c.Stream != tc.stream || strings.Join(c.Filters(""), ",") != tc.filters {
			t.Errorf("env %v args %v: %s %s %v, want %s %s %s", tc.env, tc.args, c.URL, c.Stream, c.Filters(""), tc.url, tc.stream, tc.filters)
		}
		if got := c.Filters("a.>, b.*,"); strings.Join(got, "|") != "a.>|b.*" {
			t.Errorf("Filters: %v", got)
		}
	}
}

// TestMessagesEndsWithTheContext: the loop yields what is delivered and
// ends without an error when the context ends, also while it waits.
func TestMessagesEndsWithTheContext(t *testing.T) {
	ns := testnats.Start(t)
	c := &consume.Config{URL: ns.ClientURL(), Stream: "ORDERS"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, _, err := c.Connect(ctx, "test"); err == nil || !strings.Contains(err.Error(), "stream ORDERS") {
		t.Fatalf("no stream: %v", err)
	}
	js := testnats.JetStream(t, ns.ClientURL())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"orders.created.1", "orders.created.2"} {
		if _, err := js.Publish(ctx, s, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	cnc, _, stream, err := c.Connect(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer cnc.Close()
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	loop, stop := context.WithCancel(ctx)
	defer stop()
	var got []string
	for msg, err := range consume.Messages(loop, cons) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, msg.Subject())
		if len(got) == 2 {
			stop() // the loop now waits for a third message: the context ends it
		}
	}
	if ctx.Err() != nil || strings.Join(got, " ") != "orders.created.1 orders.created.2" {
		t.Errorf("got %v, %v", got, ctx.Err())
	}
}
