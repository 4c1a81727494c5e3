package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/replica"
)

// `watcher rescan --from T [--to T]` asks the active replica of the group
// (over NATS request/reply) to read the period from T again against its
// snapshot: it publishes only real differences (a repair after an incident
// of the service); see package replica.

// runRescan is `watcher rescan --from T [--to T]`.
func runRescan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rescan", flag.ContinueOnError)
	from := fs.String("from", "", "start of the period to read again: RFC 3339 time, or a duration back from now (e.g. 6h)")
	to := fs.String("to", "", "end of the period (optional; the sweeps read on to now)")
	shop := shopFlag(fs)
	if code, ok := parseArgs(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	parse := func(name, v string) (time.Time, error) {
		var sf StartFrom
		if err := sf.Decode(v); err != nil {
			return time.Time{}, fmt.Errorf("--%s: %w", name, err)
		}
		return sf.Time(time.Now()), nil
	}
	if *from == "" {
		fmt.Fprintln(stderr, "watcher rescan: --from is required")
		return exitConfig
	}
	var req replica.RescanRequest
	var err error
	if req.From, err = parse("from", *from); err == nil && *to != "" {
		req.To, err = parse("to", *to)
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher rescan:", err)
		return exitConfig
	}
	cfg, nc, code := groupConn("rescan", *shop, stderr)
	if nc == nil {
		return code
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	key, err := replica.GroupKey(rctx, nc, cfg.LeaseBucket, cfg.GroupKey(), cfg.LegacyGroupKey(), cfg.Shop())
	rep := replica.RescanReply{}
	if err == nil {
		rep, err = replica.RequestRescan(rctx, nc, key, req)
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher rescan:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %s\n", rep.Instance, rep.Message)
	if !rep.Accepted {
		return exitFail
	}
	return exitOK
}

// groupConn is what `watcher rescan` and `watcher reset` share: the
// configuration (not validated: only the group's settings matter; in
// fleet mode the one of shop) and a connection to NATS (nil and the exit
// status when either fails).
func groupConn(cmd, shop string, stderr io.Writer) (*Config, *nats.Conn, int) {
	cfg, _, err := commandConfig(shop, false, true)
	if err != nil {
		fmt.Fprintf(stderr, "watcher %s: configuration: %v\n", cmd, err)
		return nil, nil, exitConfig
	}
	conn := cfg.NATS("orderwatch-" + cmd)
	conn.NoRetryAtStart = true // an answer now: only `watcher run` waits for NATS
	nc, err := publisher.Connect(conn)
	if err != nil {
		what, err := pipeline.NATSConnectError(cfg.NATSURL, err)
		fmt.Fprintf(stderr, "watcher %s: %s: %v\n", cmd, what, err)
		return nil, nil, exitFail
	}
	return cfg, nc, exitOK
}
