// Package consume is what every consumer of orderwatch's events needs
// besides decoding them (package events): where the events are (NATS URL,
// stream, subject prefix), from flags or from the watcher's own
// environment variables, the connection to them, and the loop over a
// consumer's messages that ends when a context does. The runnable
// consumers in examples/ are built on it; copy one into your own module
// and it builds as it is.
//
//	c := consume.Flags(flag.CommandLine, os.Getenv)
//	flag.Parse()
//	nc, js, stream, err := c.Connect(ctx, "my consumer")
//	...
//	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "billing", FilterSubjects: c.Filters(""), AckPolicy: jetstream.AckExplicitPolicy})
//	for msg, err := range consume.Messages(ctx, cons) {
//		...
//	}
package consume

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"iter"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
)

// Config says where the events are.
type Config struct {
	URL    string        // NATS server(s)
	Stream string        // the JetStream stream orderwatch publishes into
	Prefix events.Prefix // the subject prefix
}

// Flags registers -nats, -stream and -prefix. Their defaults are the
// watcher's variables, so a consumer started next to a watcher finds its
// events: WATCHER_NATS_URL (else NATS_URL, else nats://127.0.0.1:4222,
// where `watcher demo` listens), WATCHER_STREAM (else ORDERS),
// WATCHER_SUBJECT_PREFIX (else orders).
func Flags(fs *flag.FlagSet, getenv func(string) string) *Config {
	env := func(def string, names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return def
	}
	c := &Config{Prefix: events.Prefix(env(string(events.DefaultPrefix), "WATCHER_SUBJECT_PREFIX"))}
	fs.StringVar(&c.URL, "nats", env(nats.DefaultURL, "WATCHER_NATS_URL", "NATS_URL"), "NATS URL (env WATCHER_NATS_URL, NATS_URL)")
	fs.StringVar(&c.Stream, "stream", env("ORDERS", "WATCHER_STREAM"), "JetStream stream of the events (env WATCHER_STREAM)")
	fs.Func("prefix", "subject prefix (env WATCHER_SUBJECT_PREFIX; default "+c.Prefix.String()+")", func(s string) error {
		c.Prefix = events.Prefix(s)
		return nil
	})
	return c
}

// Connect connects to NATS and looks the stream up. The caller closes the
// connection.
func (c *Config) Connect(ctx context.Context, name string) (*nats.Conn, jetstream.JetStream, jetstream.Stream, error) {
	nc, err := nats.Connect(c.URL, nats.Name(name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("connect to %s: %w", c.URL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	s, err := js.Stream(ctx, c.Stream)
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("stream %s on %s: %w", c.Stream, c.URL, err)
	}
	return nc, js, s, nil
}

// Filters reads a -filter flag: comma-separated subjects (blanks around
// them do not count), or every event under the prefix when empty.
func (c *Config) Filters(flag string) []string {
	var out []string
	for _, f := range strings.Split(flag, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return []string{c.Prefix.All()}
	}
	return out
}

// Messages yields the consumer's messages until ctx ends (then the
// iteration ends without an error: what was delivered and not acknowledged
// comes again) or the consumer fails (it yields the error and ends). A
// missed heartbeat is no failure: the loop goes on. opts are the
// jetstream.Consumer's Messages options.
func Messages(ctx context.Context, cons jetstream.Consumer, opts ...jetstream.PullMessagesOpt) iter.Seq2[jetstream.Msg, error] {
	return func(yield func(jetstream.Msg, error) bool) {
		msgs, err := cons.Messages(opts...)
		if err != nil {
			yield(nil, err)
			return
		}
		defer msgs.Stop()
		stop := context.AfterFunc(ctx, msgs.Stop) // unblocks Next
		defer stop()
		for {
			msg, err := msgs.Next()
			switch {
			case errors.Is(err, jetstream.ErrMsgIteratorClosed):
				return
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				// The server's heartbeats did not arrive for a while (a
				// leader election, a congested link): the iterator pulls
				// again by itself.
				continue
			}
			if !yield(msg, err) || err != nil {
				return
			}
		}
	}
}
