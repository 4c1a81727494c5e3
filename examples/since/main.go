// Command since prints the events stored since a point in time (or a
// stream sequence) and exits at the end of the stream, or follows on with
// -follow. It uses an ordered consumer: nothing is kept on the server, so
// it suits a look back or a backfill; a service that must not miss events
// uses a durable consumer (examples/durable), which can start by time too.
//
//	go run ./examples/since -since 6h
//	go run ./examples/since -since 2026-11-22T09:00:00+01:00 -filter 'orders.status_changed.*.8.*'
//	go run ./examples/since -seq 1042 -follow
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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

type config struct {
	conn    *consume.Config
	start   time.Time // DeliverByStartTime, or
	seq     uint64    // DeliverByStartSequence
	filters []string
	follow  bool
}

func parse(args []string, getenv func(string) string, now time.Time, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("since", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{conn: consume.Flags(fs, getenv)}
	since := fs.String("since", "", "where to start: a duration back from now (6h, 30m) or a time (RFC 3339)")
	fs.Uint64Var(&c.seq, "seq", 0, "where to start: a stream sequence (instead of -since)")
	filter := fs.String("filter", "", "filter subjects, comma-separated (default: every event)")
	fs.BoolVar(&c.follow, "follow", false, "go on with new events after the end of the stream")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case (*since == "") == (c.seq == 0):
		fmt.Fprintln(stderr, "since: give one of -since and -seq")
		return nil, errors.New("no start")
	case *since != "":
		if d, err := time.ParseDuration(*since); err == nil {
			c.start = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, *since); err == nil {
			c.start = t
		} else {
			fmt.Fprintf(stderr, "since: -since %q is neither a duration nor an RFC 3339 time\n", *since)
			return nil, err
		}
	}
	c.filters = c.conn.Filters(*filter)
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parse(args, getenv, time.Now(), stderr)
	if err != nil {
		return 2
	}
	if err := since(ctx, c, stdout); err != nil {
		fmt.Fprintln(stderr, "since:", err)
		return 1
	}
	return 0
}

// since prints the events from the start point on, until the end of the
// stream (or ctx's end with follow).
func since(ctx context.Context, c *config, stdout io.Writer) error {
	nc, _, stream, err := c.conn.Connect(ctx, "orderwatch since example")
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: c.filters}
	if c.seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.seq
	} else {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &c.start
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return err
	}
	if info.NumPending == 0 && !c.follow {
		fmt.Fprintln(stdout, "no events")
		return nil
	}
	for msg, err := range consume.Messages(ctx, cons) {
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if ev, err := events.FromMsg(msg); err != nil {
			fmt.Fprintf(stdout, "seq %d %s: %v\n", meta.Sequence.Stream, msg.Subject(), err)
		} else {
			fmt.Fprintf(stdout, "seq %d stored %s: %s\n", meta.Sequence.Stream, meta.Timestamp.UTC().Format(time.RFC3339Nano), ev)
		}
		if meta.NumPending == 0 && !c.follow {
			return nil // the end of the stream, as it was when this message came
		}
	}
	return nil
}
