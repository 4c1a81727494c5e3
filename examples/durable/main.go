// Command durable is a durable pull consumer of orderwatch's events: it
// prints one line per event and acknowledges it explicitly once handled.
// Stopped (Ctrl-C, a crash, a deploy) and started again with the same
// -durable name, it goes on where it stopped: the server keeps the
// consumer's position, and an event that was delivered but not
// acknowledged is delivered again after -ack-wait. Nothing is skipped.
//
//	go run ./examples/durable -nats nats://127.0.0.1:4222 -filter 'orders.status_changed.>'
//
// See docs/consuming.md, "A durable consumer".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/events/consume"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// config is the command line.
type config struct {
	conn          *consume.Config
	durable       string
	filters       []string
	ackWait       time.Duration
	maxAckPending int

	// crash, when set, is asked before each acknowledgement; true stops
	// the consumer at once without acknowledging, as a crash would (tests).
	crash func(events.Event) bool
	// handled, when set, is told of each acknowledged event (tests).
	handled func(events.Event, *jetstream.MsgMetadata)
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("durable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{conn: consume.Flags(fs, getenv)}
	fs.StringVar(&c.durable, "durable", "orderwatch-example", "durable consumer name: the server keeps its position under this name")
	filter := fs.String("filter", "", "filter subjects, comma-separated (default: every event, {prefix}.>)")
	fs.DurationVar(&c.ackWait, "ack-wait", 30*time.Second, "redeliver an event not acknowledged within this time")
	fs.IntVar(&c.maxAckPending, "max-ack-pending", 1000, "most events delivered and not yet acknowledged")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.filters = c.conn.Filters(*filter)
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parse(args, getenv, stderr)
	if err != nil {
		return 2
	}
	if err := consumeEvents(ctx, c, stdout); err != nil {
		fmt.Fprintln(stderr, "durable:", err)
		return 1
	}
	return 0
}

// consumeEvents creates the durable consumer (or takes the existing one up
// where it stopped) and handles its events until ctx ends.
func consumeEvents(ctx context.Context, c *config, stdout io.Writer) error {
	nc, _, stream, err := c.conn.Connect(ctx, "orderwatch durable example")
	if err != nil {
		return err
	}
	defer nc.Close()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:        c.durable,
		FilterSubjects: c.filters,
		AckPolicy:      jetstream.AckExplicitPolicy, // every event acknowledged on its own, after it is handled
		AckWait:        c.ackWait,
		MaxAckPending:  c.maxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy, // at creation only: an existing consumer keeps its position
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", c.durable, err)
	}
	fmt.Fprintf(stdout, "consumer %s on %s, subjects %s\n", c.durable, c.conn.Stream, strings.Join(c.filters, " "))

	for msg, err := range consume.Messages(ctx, cons) {
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		ev, err := events.FromMsg(msg)
		switch {
		case errors.Is(err, events.ErrUnknownType):
			// A newer orderwatch: not for this consumer.
			if err := msg.DoubleAck(ctx); err != nil {
				return err
			}
			continue
		case err != nil:
			// Never decodable: redelivering it would not help.
			fmt.Fprintf(stdout, "seq %d: %v\n", meta.Sequence.Stream, err)
			if err := msg.Term(); err != nil {
				return err
			}
			continue
		}
		if c.crash != nil && c.crash(ev) {
			return nil
		}
		// Handle the event; here: one line. A handler that fails would
		// Nak (or NakWithDelay) and the event would come again.
		fmt.Fprintf(stdout, "seq %d delivery %d: %s (id %s)\n", meta.Sequence.Stream, meta.NumDelivered, ev, ev.ID)
		// DoubleAck waits for the server to confirm: an event acknowledged
		// here is not delivered again after a restart.
		if err := msg.DoubleAck(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // stopped: the event comes again
			}
			return fmt.Errorf("ack seq %d: %w", meta.Sequence.Stream, err)
		}
		if c.handled != nil {
			c.handled(ev, meta)
		}
	}
	return nil
}
