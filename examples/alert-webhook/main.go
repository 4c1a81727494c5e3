// Command alert-webhook posts one line to a webhook for every order that
// enters a status: a status change into it, or a new (or newly
// discovered) order in it. The body is {"text": "<line>"}, which Slack,
// Mattermost and most chat webhooks accept.
//
//	go run ./examples/alert-webhook -status 5 -webhook https://hooks.example/T000/B000
//
// Each event is posted once: the ids of posted events are kept in a
// JetStream key-value bucket (-dedup-bucket, for -dedup-window), so a
// redelivery, a replay, a restart or a second instance does not post it
// again. A failed post is retried with backoff (-attempts in process, then
// the event is handed back to JetStream and comes again later): an alert
// is not lost while the webhook is down.
//
// Orders already in the status when orderwatch made its first sync never
// alert: the first sync is silent (docs/consuming.md).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
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

type config struct {
	conn        *consume.Config
	status      events.Decimal
	webhook     string
	durable     string
	bucket      string
	window      time.Duration
	retry       time.Duration
	attempts    int
	httpTimeout time.Duration
	deliverAll  bool

	// acked, when set, is told of every acknowledged event (tests).
	acked func(events.Event)
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("alert-webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{conn: consume.Flags(fs, getenv)}
	status := fs.String("status", "", "alert when an order enters this status (5, 5.1, ...); required")
	fs.StringVar(&c.webhook, "webhook", getenv("ALERT_WEBHOOK_URL"), "URL to POST {\"text\": line} to (env ALERT_WEBHOOK_URL); required")
	fs.StringVar(&c.durable, "durable", "", "durable consumer name (default orderwatch-alert-<status>)")
	fs.StringVar(&c.bucket, "dedup-bucket", "orderwatch_alerts", "key-value bucket of the posted event ids")
	fs.DurationVar(&c.window, "dedup-window", 7*24*time.Hour, "how long a posted event id is remembered: at least the stream's max age, so a replay posts nothing twice")
	fs.DurationVar(&c.retry, "retry", time.Second, "first wait before a failed post is retried (doubling, at most 30s)")
	fs.IntVar(&c.attempts, "attempts", 5, "posts of an event before it is handed back to JetStream for later")
	fs.DurationVar(&c.httpTimeout, "http-timeout", 10*time.Second, "timeout of one post")
	fs.BoolVar(&c.deliverAll, "all", false, "when the consumer is created: start at the stream's first event (default: at the next one)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.status = events.Decimal(*status)
	if _, err := events.ParseStatusToken(events.StatusToken(c.status)); err != nil || c.status == "" {
		fmt.Fprintf(stderr, "alert-webhook: -status %q is not a status (5, 5.1, ...)\n", *status)
		return nil, errors.New("bad -status")
	}
	if c.webhook == "" {
		fmt.Fprintln(stderr, "alert-webhook: -webhook (or ALERT_WEBHOOK_URL) is required")
		return nil, errors.New("no -webhook")
	}
	if c.durable == "" {
		c.durable = "orderwatch-alert-" + events.StatusToken(c.status)
	}
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c, err := parse(args, getenv, stderr)
	if err != nil {
		return 2
	}
	if err := alert(ctx, c, stdout); err != nil {
		fmt.Fprintln(stderr, "alert-webhook:", err)
		return 1
	}
	return 0
}

// alert consumes the events that can put an order into the status and
// posts each entry once, until ctx ends.
func alert(ctx context.Context, c *config, stdout io.Writer) error {
	nc, js, stream, err := c.conn.Connect(ctx, "orderwatch alert-webhook example")
	if err != nil {
		return err
	}
	defer nc.Close()
	seen, err := events.CreateKV(ctx, js, c.bucket, c.window)
	if err != nil {
		return err
	}
	p := c.conn.Prefix
	// Into the status, and first sight (an order can be new in it). The
	// three filters do not overlap.
	filters := []string{p.Into(c.status), p.Type(events.Created), p.Type(events.Discovered)}
	deliver := jetstream.DeliverNewPolicy // alert from now on, not on the stream's history
	if c.deliverAll {
		deliver = jetstream.DeliverAllPolicy
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:        c.durable,
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.httpTimeout + 30*time.Second, // one post with its retries; extended by InProgress
		MaxAckPending:  100,
		DeliverPolicy:  deliver, // when created; a restart goes on where it stopped
	})
	if err != nil {
		return fmt.Errorf("consumer %s: %w", c.durable, err)
	}
	fmt.Fprintf(stdout, "alerting on orders entering status %s (consumer %s, subjects %v) to %s\n", c.status, c.durable, filters, c.webhook)

	client := &http.Client{Timeout: c.httpTimeout}
	for msg, err := range consume.Messages(ctx, cons) {
		if err != nil {
			return err
		}
		ev, err := events.FromMsg(msg)
		switch {
		case errors.Is(err, events.ErrUnknownType):
		case err != nil:
			fmt.Fprintf(stdout, "%s: %v\n", msg.Subject(), err)
			msg.Term()
			continue
		case ev.Entered(c.status):
			// Keyed by shop and id: two shops can publish the same id.
			err := events.Once(ctx, seen, events.Key(msg.Headers(), ev), func(ctx context.Context) error {
				text := line(ev, c.status, shopOf(c, msg))
				if err := c.post(ctx, client, msg, text); err != nil {
					return err
				}
				fmt.Fprintln(stdout, "posted:", text)
				return nil
			})
			if err != nil {
				if ctx.Err() != nil {
					return nil // stopped: the event comes again
				}
				fmt.Fprintf(stdout, "order %d: %v; handed back, it comes again\n", ev.OrderID(), err)
				msg.NakWithDelay(30 * time.Second)
				continue
			}
		}
		if err := msg.DoubleAck(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if c.acked != nil {
			c.acked(ev)
		}
	}
	return nil
}

// line is the alert of one order (of shop, when not "").
func line(ev events.Event, status events.Decimal, shop string) string {
	at := ev.Time.Format(time.RFC3339)
	order := fmt.Sprint("order ", ev.OrderID())
	if shop != "" {
		order += " of shop " + shop
	}
	switch ev.Type {
	case events.Created:
		return fmt.Sprintf("%s created in status %s at %s", order, status, at)
	case events.Discovered:
		return fmt.Sprintf("%s first seen in status %s at %s", order, status, at)
	}
	return fmt.Sprintf("%s entered status %s (from %s) at %s", order, status, ev.Data.Before.StatusID, at)
}

// shopOf is the shop of msg when the prefix selects several shops (a
// wildcard, fleet mode): its Orderwatch-Shop header.
func shopOf(c *config, msg jetstream.Msg) string {
	if !strings.ContainsAny(c.conn.Prefix.String(), "*>") {
		return ""
	}
	return msg.Headers().Get("Orderwatch-Shop")
}

// post sends the line, retrying with backoff; it tells JetStream the event
// is in progress before each wait, so it is not redelivered meanwhile.
func (c *config) post(ctx context.Context, client *http.Client, msg jetstream.Msg, text string) error {
	body, _ := json.Marshal(map[string]string{"text": text})
	wait := c.retry
	var err error
	for attempt := 1; ; attempt++ {
		if err = send(ctx, client, c.webhook, body); err == nil {
			return nil
		}
		if attempt >= c.attempts {
			return fmt.Errorf("post failed %d times: %w", attempt, err)
		}
		msg.InProgress()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}

func send(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
