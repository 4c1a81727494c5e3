package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"time"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/state"
)

// runState is `watcher state [-json] [ORDER_ID]`: what the state file holds,
// or one order's tracked state, or (-status, -older-than) a page of the
// orders in a status as GET /state/orders lists them. When a running
// watcher holds the file, it asks that watcher over HTTP
// (WATCHER_HTTP_ADDR); with -url it asks the watcher at that URL and
// needs neither the state file nor the configuration.
func runState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("state", flag.ContinueOnError)
	asJSON := fl.Bool("json", false, "print the report as JSON (the shape of GET /state)")
	fl.String("status", "", "list the orders in this status (a number, or none) as JSON, like GET /state/orders")
	fl.Duration("older-than", 0, "list the orders in their status for longer than this (48h)")
	fl.Int64("after", 0, "a listing's cursor: the previous page's next")
	fl.Int("limit", pipeline.DefaultListLimit, "orders per page of a listing (at most 10000)")
	askURL := fl.String("url", "", "ask the running watcher at this URL (its WATCHER_HTTP_ADDR: http://127.0.0.1:9464 for `watcher demo`) instead of reading the state file")
	shop := shopFlag(fl)
	if code, ok := parseArgs(fl, args, 1, stdout, stderr); !ok {
		return code
	}
	var req pipeline.StateQuery
	if fl.NArg() == 1 {
		id, err := pipeline.ParseOrderID(fl.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "watcher state:", err)
			return exitConfig
		}
		req.OrderID = id
	}
	// A listing when one of its flags is given, with GET /state/orders's
	// parameters (checked by the same parser).
	fl.Visit(func(f *flag.Flag) {
		name := map[string]string{"status": "status", "older-than": "olderThan", "after": "after", "limit": "limit"}[f.Name]
		if name != "" {
			if req.List == nil {
				req.List = url.Values{}
			}
			req.List.Set(name, f.Value.String())
		}
	})
	if req.List != nil {
		if req.OrderID != 0 {
			fmt.Fprintln(stderr, "watcher state: an order id or a listing (-status, -older-than, -after, -limit), not both")
			return exitConfig
		}
		if _, err := pipeline.ParseListQuery(req.List, time.Now()); err != nil {
			fmt.Fprintln(stderr, "watcher state:", err)
			return exitConfig
		}
	}
	if *askURL != "" {
		req.Shop = *shop
		body, err := pipeline.AskState(ctx, *askURL, req)
		return printState(body, err, req, *asJSON, stdout, stderr)
	}
	for _, l := range unknownVarsText() {
		fmt.Fprintln(stderr, "watcher state: warning:", l)
	}
	cfg, _, err := commandConfig(*shop, false, false)
	if err != nil {
		fmt.Fprintln(stderr, "watcher state: configuration:", err)
		return exitConfig
	}

	var body []byte
	s, err := state.Open(cfg.StatePath, state.Options{ReadOnly: true, Timeout: 250 * time.Millisecond}) // a running watcher holds it for good
	switch {
	case err == nil:
		defer s.Close()
		body, err = localState(s, cfg, req)
		if *shop != "" {
			if h := fleet.HeldElsewhere(ctx, cfg); h != "" {
				fmt.Fprintf(stderr, "watcher state: warning: %s runs shop %s: %s is not current (ask that member)\n", h, *shop, cfg.StatePath)
			}
		}
	case errors.Is(err, state.ErrLocked):
		body, err = remoteState(ctx, cfg, req)
	case errors.Is(err, fs.ErrNotExist) && *shop != "":
		err = fmt.Errorf("%w: this member has not run shop %s; ask the member that runs it (GET /state on a member names its holder)", err, *shop)
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("%w (set WATCHER_STATE_PATH to the watcher's state file, or ask a running watcher with -url)", err)
	}
	return printState(body, err, req, *asJSON, stdout, stderr)
}

// printState prints what `watcher state` got: the JSON of an order or a
// listing, the report as text (or JSON), or the error.
func printState(body []byte, err error, req pipeline.StateQuery, asJSON bool, stdout, stderr io.Writer) int {
	if err != nil {
		fmt.Fprintln(stderr, "watcher state:", err)
		return exitFail
	}
	if req.OrderID != 0 || req.List != nil || asJSON {
		stdout.Write(body)
		return exitOK
	}
	var rep pipeline.Report
	if err := json.Unmarshal(body, &rep); err != nil {
		fmt.Fprintln(stderr, "watcher state: reading the report:", err)
		return exitFail
	}
	rep.WriteText(stdout, time.Now())
	return exitOK
}

// localState reads the report, an order or a listing's page from the state
// file, as JSON.
func localState(s *state.Store, cfg *Config, req pipeline.StateQuery) ([]byte, error) {
	var v any
	orderID := req.OrderID
	switch {
	case req.List != nil:
		q, err := pipeline.ParseListQuery(req.List, time.Now())
		if err != nil {
			return nil, err
		}
		if v, err = pipeline.ListOrders(s, q); err != nil {
			return nil, err
		}
	case orderID == 0:
		rep, err := pipeline.StoppedReport(s, cfg)
		if err != nil {
			return nil, err
		}
		v = rep
	default:
		rep, ok, err := pipeline.LookupOrder(s, orderID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("order %d is %w in %s", orderID, pipeline.ErrNotTracked, cfg.StatePath)
		}
		v = rep
	}
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

// remoteState asks the watcher that holds the state file.
func remoteState(ctx context.Context, cfg *Config, req pipeline.StateQuery) ([]byte, error) {
	body, err := pipeline.AskState(ctx, pipeline.LocalURL(cfg.HTTPAddr), req)
	if err != nil && !errors.Is(err, pipeline.ErrNotTracked) {
		return nil, fmt.Errorf("%s is held by a running watcher: %w (set WATCHER_HTTP_ADDR to its address, or use -url)", cfg.StatePath, err)
	}
	return body, err
}
