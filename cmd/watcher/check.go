package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// runCheck is `watcher check`: validate the config, log in, search once,
// connect to NATS and check the stream, say how the scope was split. It prints a report and exits 0 only when all is well.
func runCheck(ctx context.Context, stdout, stderr io.Writer) int {
	cfg, err := LoadConfig()
	if err != nil {
		fmt.Fprintln(stdout, "FAIL configuration:", err)
		return exitConfig
	}
	fmt.Fprintln(stdout, "ok   configuration")
	failed := false
	report := func(err error, okText, failText string) {
		if err != nil {
			failed = true
			fmt.Fprintf(stdout, "FAIL %s: %v\n", failText, err)
			return
		}
		fmt.Fprintf(stdout, "ok   %s\n", okText)
	}
	scope, _ := cfg.scope()
	writeScope(stdout, scope)

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client, err := plenty.New(plenty.Config{
		BaseURL: cfg.PlentyURL, Username: cfg.PlentyUsername, Password: cfg.PlentyPassword,
		APIVersion: cfg.PlentyAPIVersion, APIVendor: cfg.PlentyAPIVendor, Timeout: cfg.PlentyTimeout,
		Tokens: checkTokens(cfg.StatePath), NoRenew: true, Retry: plenty.RetryConfig{MaxElapsed: 20 * time.Second},
	})
	if err != nil {
		report(err, "", "client")
		return exitFail
	}
	err = client.Login(ctx)
	report(err, "logged in to "+cfg.PlentyURL, "login")
	if err == nil {
		p, err := client.SearchOrders(ctx, plenty.Query{Filters: scope.Sent, Complex: scope.SentGroup, ItemsPerPage: 1})
		if err == nil {
			th := client.Throttle()
			report(nil, fmt.Sprintf("order search: %d orders match the filters sent; calls left: short %d/%d, long %d/%d",
				p.TotalsCount, th.Short.CallsLeft, th.Short.Limit, th.Long.CallsLeft, th.Long.Limit), "")
		} else {
			report(err, "", "order search")
		}
	}

	nc, err := publisher.Connect(publisher.ConnConfig{
		URL: cfg.NATSURL, Name: "orderwatch-check", User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken,
		CredsFile: cfg.NATSCreds, NKeyFile: cfg.NATSNKey, TLSCA: cfg.NATSTLSCA, TLSCert: cfg.NATSTLSCert, TLSKey: cfg.NATSTLSKey,
	})
	if err == nil {
		defer nc.Close()
		err = waitConnected(ctx, nc.IsConnected, 10*time.Second)
	}
	report(err, "connected to NATS at "+publisher.RedactURL(cfg.NATSURL), "NATS")
	if err == nil {
		if cfg.Stream == "" {
			fmt.Fprintln(stdout, "WARN WATCHER_STREAM is empty: core NATS mode, at most once (a subscriber that is not connected misses events)")
		} else {
			pub, err := publisher.New(nc, emptyOutbox{}, publisher.Config{
				Stream: cfg.Stream, CreateStream: false, SubjectPrefix: cfg.SubjectPrefix,
				DuplicateWindow: cfg.DuplicateWindow, MaxAge: cfg.StreamMaxAge,
			})
			if err == nil {
				err = pub.EnsureStream(ctx)
			}
			if err != nil && cfg.StreamCreate && errors.Is(err, jetstream.ErrStreamNotFound) {
				fmt.Fprintf(stdout, "WARN stream %s: %v (the watcher creates it at start: WATCHER_STREAM_CREATE=true)\n", cfg.Stream, err)
			} else {
				report(err, fmt.Sprintf("stream %s captures %s.> with a duplicate window", cfg.Stream, cfg.SubjectPrefix), "stream "+cfg.Stream)
			}
		}
	}
	if failed {
		fmt.Fprintln(stdout, "check failed")
		return exitFail
	}
	fmt.Fprintln(stdout, "check passed")
	return exitOK
}

// writeScope says how the scope was split: what the service filters, what
// orderwatch evaluates on before and after of every change.
func writeScope(w io.Writer, sp diff.ScopeSplit) {
	if len(sp.Sent) == 0 && sp.SentGroup == nil && sp.Local == nil {
		fmt.Fprintln(w, "ok   scope: every order (WATCHER_SCOPE and WATCHER_SCOPE_JSON are empty)")
		return
	}
	sent := scopeSentText(sp)
	if sent == "" {
		sent = "nothing (every order is read)"
	}
	fmt.Fprintf(w, "ok   scope sent to the service (fields that never change): %s\n", sent)
	if sp.Local != nil {
		fmt.Fprintf(w, "ok   scope evaluated by orderwatch on before and after (fields that change; an order leaving the scope is published): %s\n", sp.Local)
	} else {
		fmt.Fprintln(w, "ok   scope evaluated by orderwatch: nothing")
	}
}

// checkTokens reuses the watcher's stored session when the state file can
// be read (no second session); a running watcher holds the lock, and then
// check logs in with a session of its own, in memory.
func checkTokens(path string) plenty.TokenStore {
	s, err := state.Open(path, state.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		return &plenty.MemoryTokenStore{}
	}
	defer s.Close()
	t, err := s.LoadToken(context.Background())
	m := &plenty.MemoryTokenStore{}
	if err == nil {
		_ = m.SaveToken(context.Background(), t)
	}
	return m
}

func waitConnected(ctx context.Context, connected func() bool, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !connected() {
		if time.Now().After(deadline) {
			return errors.New("not connected within " + limit.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// emptyOutbox lets check use the publisher's stream verification.
type emptyOutbox struct{}

func (emptyOutbox) Outbox(uint64, int) ([]state.OutboxEntry, error) { return nil, nil }
func (emptyOutbox) DeleteOutbox(...uint64) error                    { return nil }
func (emptyOutbox) OutboxDepth() int                                { return 0 }

// runState is `watcher state`: what the state file holds.
func runState(stdout, stderr io.Writer) int {
	path := "/var/lib/orderwatch/state.db"
	if cfg, err := LoadConfig(); err == nil {
		path = cfg.StatePath
	} else if p := getenvStatePath(); p != "" {
		path = p
	}
	s, err := state.Open(path, state.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		if errors.Is(err, state.ErrLocked) {
			fmt.Fprintf(stdout, "%s is locked by a running watcher: its figures are on /metrics (orderwatch_outbox_depth, orderwatch_watermark_lag_seconds, ...)\n", path)
			return exitFail
		}
		fmt.Fprintln(stderr, "watcher state:", err)
		return exitFail
	}
	defer s.Close()
	st, err := s.Stats()
	if err != nil {
		fmt.Fprintln(stderr, "watcher state:", err)
		return exitFail
	}
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC3339), time.Since(t).Round(time.Second))
	}
	fmt.Fprintf(stdout, "state file     %s (%d bytes, schema %d)\n", path, st.FileSize, st.SchemaVersion)
	fmt.Fprintf(stdout, "watermark      %s\n", ts(st.Watermark))
	fmt.Fprintf(stdout, "baseline       %s\n", ts(st.Baseline))
	fmt.Fprintf(stdout, "last sweep     %s\n", ts(st.LastSweep))
	fmt.Fprintf(stdout, "orders         %d\n", st.Orders)
	fmt.Fprintf(stdout, "outbox depth   %d\n", st.OutboxDepth)
	return exitOK
}
