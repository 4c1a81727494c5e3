package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/publisher"
)

// `watcher rescan --from T [--to T]` asks the active replica of the group
// (over NATS request/reply) to read the period from T again against its
// snapshot: it publishes only real differences (a repair after an incident
// of the service). The active rewinds its watermark to T between two
// sweeps; the sweeps that follow read from there to now in verified
// slices, so the period up to --to is covered (and what follows it, which
// is idempotent). Progress: orderwatch_watermark_timestamp_seconds climbing
// back to now, orderwatch_rescan_requests_total.

// rescanSubject is the group's request subject (outside the stream's
// subjects).
func rescanSubject(key string) string { return "orderwatch.rescan." + key }

type rescanRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to,omitzero"`
}

type rescanReply struct {
	Instance  string    `json:"instance"`
	Accepted  bool      `json:"accepted"`
	Watermark time.Time `json:"watermark,omitzero"` // before the rewind
	Message   string    `json:"message"`
}

// serveRescan answers the group's rescan requests while this replica is
// active; stop unsubscribes.
func (d *daemon) serveRescan() (stop func()) {
	r := d.rep
	sub, err := d.nc.Subscribe(rescanSubject(r.key), func(msg *nats.Msg) {
		rep := rescanReply{Instance: r.instance}
		var req rescanRequest
		m, merr := d.store.Meta()
		switch {
		case json.Unmarshal(msg.Data, &req) != nil || req.From.IsZero():
			rep.Message = "want {\"from\": RFC 3339 time}"
		case d.gate() != nil:
			rep.Message = "not the active replica"
		case merr != nil:
			rep.Message = merr.Error()
		case !req.From.Before(m.Watermark):
			rep.Accepted, rep.Watermark = true, m.Watermark
			rep.Message = "nothing to do: the watermark is at or before that time; the next sweep reads from there anyway"
		default:
			r.rescanFrom.Store(&req.From)
			rep.Accepted, rep.Watermark = true, m.Watermark
			rep.Message = fmt.Sprintf("the next sweep reads from %s to now against the snapshot and publishes only differences", req.From.UTC().Format(time.RFC3339))
			d.log.Info("rescan requested", "from", req.From.UTC().Format(time.RFC3339), "to", req.To.UTC().Format(time.RFC3339), "watermark", m.Watermark.Format(time.RFC3339))
		}
		b, _ := json.Marshal(rep)
		_ = msg.Respond(b)
	})
	if err != nil {
		d.log.Warn("rescan requests cannot be served", "err", err)
		return func() {}
	}
	return func() { _ = sub.Unsubscribe() }
}

// applyRescan rewinds the watermark for a pending rescan request; called
// between two sweeps (OnSweep), so no sweep in flight moves it forward again.
func (d *daemon) applyRescan() {
	if d.rep == nil {
		return
	}
	from := d.rep.rescanFrom.Swap(nil)
	if from == nil {
		return
	}
	if err := d.store.RewindWatermark(*from); err != nil {
		d.log.Error("rescan: rewinding the watermark failed", "err", err)
		return
	}
	d.rep.rescans.Inc()
	d.log.Info("rescan: watermark rewound; the sweeps read the period again", "to", from.UTC().Format(time.RFC3339))
}

// runRescan is `watcher rescan --from T [--to T]`.
func runRescan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rescan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "start of the period to read again: RFC 3339 time, or a duration back from now (e.g. 6h)")
	to := fs.String("to", "", "end of the period (optional; the sweeps read on to now)")
	if err := fs.Parse(args); err != nil {
		return exitConfig
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
	var req rescanRequest
	var err error
	if req.From, err = parse("from", *from); err == nil && *to != "" {
		req.To, err = parse("to", *to)
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher rescan:", err)
		return exitConfig
	}
	cfg, err := envConfig()
	if err == nil {
		err = cfg.readFiles()
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher rescan: configuration:", err)
		return exitConfig
	}
	nc, err := publisher.Connect(publisher.ConnConfig{
		URL: cfg.NATSURL, Name: "orderwatch-rescan", User: cfg.NATSUser, Password: cfg.NATSPassword, Token: cfg.NATSToken,
		CredsFile: cfg.NATSCreds, NKeyFile: cfg.NATSNKey, TLSCA: cfg.NATSTLSCA, TLSCert: cfg.NATSTLSCert, TLSKey: cfg.NATSTLSKey,
	})
	if err != nil {
		fmt.Fprintln(stderr, "watcher rescan: NATS:", err)
		return exitFail
	}
	defer nc.Close()
	b, _ := json.Marshal(req)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitConnected(rctx, nc.IsConnected, 10*time.Second); err != nil {
		fmt.Fprintln(stderr, "watcher rescan: NATS:", err)
		return exitFail
	}
	msg, err := nc.RequestWithContext(rctx, rescanSubject(lease.Key(cfg.PlentyURL, cfg.Stream)), b)
	if errors.Is(err, nats.ErrNoResponders) {
		fmt.Fprintln(stderr, "watcher rescan: no active replica answers (none running, a takeover under way, or WATCHER_LEASE is off)")
		return exitFail
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher rescan:", err)
		return exitFail
	}
	var rep rescanReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		fmt.Fprintln(stderr, "watcher rescan: bad answer:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "%s: %s\n", rep.Instance, rep.Message)
	if !rep.Accepted {
		return exitFail
	}
	return exitOK
}
