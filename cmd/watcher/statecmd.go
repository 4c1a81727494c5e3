package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/state"
)

// stateReport is what the state file holds, for `watcher state` and the
// watcher's GET /state. It never carries the session token.
type stateReport struct {
	StateFile     string    `json:"stateFile"`
	FileSizeBytes int64     `json:"fileSizeBytes"`
	SchemaVersion int       `json:"schemaVersion"`
	Watermark     time.Time `json:"watermark,omitzero"` // every change up to here has been recorded
	Baseline      time.Time `json:"baseline,omitzero"`  // upper end of the first sweep
	LastSweep     time.Time `json:"lastSweep,omitzero"` // end of the last verified sweep (local clock)
	OrdersTracked int       `json:"ordersTracked"`
	OutboxDepth   int       `json:"outboxDepth"`
	FirstSync     firstSync `json:"firstSync"`
	// Quarantine lists the orders whose entries cannot be decoded
	// (quarantine.go), with the raw reason.
	Quarantine []state.Quarantined `json:"quarantine"`

	Paused *pausedReport `json:"paused,omitempty"` // a pending wait the service asked for (budget.go)
	Budget *budgetReport `json:"budget,omitempty"` // the sweeps' call budget as last saved (budget.go)

	// Lease is the hot standby's view (standby.go); only from a running watcher.
	Lease *leaseReport `json:"lease,omitempty"`
	// Timings in force and why (timings.go); for a stopped watcher, as
	// last recorded.
	Timings *timingsReport `json:"timings,omitempty"`
}

// firstSync is the progress of the first sweep (the baseline): the share of
// its window, from the start point to the baseline, below the watermark.
type firstSync struct {
	Done     bool    `json:"done"`
	Progress float64 `json:"progress"` // 0..1
}

// orderReport is one order's tracked state (GET /state/orders/{id}).
type orderReport struct {
	OrderID int64       `json:"orderId"`
	State   *diff.State `json:"state"` // the shape of an event's data.after; null when never read
	// Quarantine is set while the order's entry cannot be decoded.
	Quarantine *state.Quarantined `json:"quarantine,omitempty"`
}

// newStateReport reads the report from an open state file. start is the
// configured start point (WATCHER_START_FROM) of the first sweep.
func newStateReport(s *state.Store, start StartFrom) (stateReport, error) {
	st, err := s.Stats()
	if err != nil {
		return stateReport{}, err
	}
	qs, err := quarantineReport(s)
	if err != nil {
		return stateReport{}, err
	}
	rep := stateReport{
		StateFile: s.Path(), FileSizeBytes: st.FileSize, SchemaVersion: st.SchemaVersion,
		Watermark: st.Watermark, Baseline: st.Baseline, LastSweep: st.LastSweep,
		OrdersTracked: st.Orders, OutboxDepth: st.OutboxDepth,
		FirstSync:  firstSync{Done: st.BaselineDone, Progress: firstSyncProgress(st, start)},
		Quarantine: qs,
	}
	rep.Paused, rep.Budget = budgetReports(s, time.Now())
	return rep, nil
}

// firstSyncProgress: 1 once the baseline is done, else how far the
// watermark has come from the start point towards the baseline. A start
// given as a duration was taken back from the first start, when the baseline
// was recorded (the settle time apart).
func firstSyncProgress(st state.Stats, start StartFrom) float64 {
	if st.BaselineDone {
		return 1
	}
	if st.Baseline.IsZero() || st.Watermark.IsZero() {
		return 0
	}
	from := start.At
	if from.IsZero() {
		from = st.Baseline.Add(-start.Back)
	}
	total := st.Baseline.Sub(from)
	if total <= 0 {
		return 0
	}
	return min(max(float64(st.Watermark.Sub(from))/float64(total), 0), 1)
}

// lookupOrder reads one order's tracked state and quarantine record; ok
// is false when the order is neither tracked nor quarantined.
func lookupOrder(s *state.Store, id int64) (orderReport, bool, error) {
	out := make([]*diff.State, 1)
	if err := s.Lookup([]int64{id}, out); err != nil {
		return orderReport{}, false, err
	}
	rep := orderReport{OrderID: id, State: out[0]}
	q, found, err := s.QuarantinedOrder(id)
	if err != nil {
		return orderReport{}, false, err
	}
	if found {
		rep.Quarantine = &q
	}
	return rep, rep.State != nil || found, nil
}

// parseOrderID reads an order id of the command line or a URL.
func parseOrderID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("order id %q: want a positive whole number", s)
	}
	return id, nil
}

// serveStateReport is GET /state.
func (d *daemon) serveStateReport(w http.ResponseWriter, _ *http.Request) {
	rep, err := newStateReport(d.store, d.cfg.StartFrom)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if pct := d.firstSyncPct.Load(); pct >= 0 && !rep.FirstSync.Done {
		// The running sweep's position, finer than the file's watermark
		// (the same figure as orderwatch_first_sync_progress_ratio).
		rep.FirstSync.Progress = float64(pct) / 100
	}
	rep.Paused = newPausedReport(d.cl().Pacer().Pending()) // the running process's view
	rep.Lease = d.leaseReport()
	rep.Timings = newTimingsReport(d.tm().InForce())
	writeJSON(w, rep)
}

// serveOrderState is GET /state/orders/{id}.
func (d *daemon) serveOrderState(w http.ResponseWriter, r *http.Request) {
	id, err := parseOrderID(r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rep, ok, err := lookupOrder(d.store, id)
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case !ok:
		http.Error(w, fmt.Sprintf("order %d is not tracked", id), http.StatusNotFound)
	default:
		writeJSON(w, rep)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}

// localURL is the base URL of a watcher listening on addr, seen from this
// machine (or pod): ":9090" and "0.0.0.0:9090" are reached on loopback.
func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// getLocal makes a GET to a running watcher's HTTP endpoint.
func getLocal(ctx context.Context, base, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// runState is `watcher state [-json] [ORDER_ID]`: what the state file holds,
// or one order's tracked state. When a running watcher holds the file, it
// asks that watcher over HTTP (WATCHER_HTTP_ADDR).
func runState(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("state", flag.ContinueOnError)
	asJSON := fl.Bool("json", false, "print the report as JSON (the shape of GET /state)")
	if code, ok := parseArgs(fl, args, 1, stdout, stderr); !ok {
		return code
	}
	var orderID int64
	if fl.NArg() == 1 {
		id, err := parseOrderID(fl.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "watcher state:", err)
			return exitConfig
		}
		orderID = id
	}
	for _, l := range unknownVarsText() {
		fmt.Fprintln(stderr, "watcher state: warning:", l)
	}
	cfg, err := envConfig()
	if err != nil {
		fmt.Fprintln(stderr, "watcher state: configuration:", err)
		return exitConfig
	}

	var body []byte
	s, err := state.Open(cfg.StatePath, state.Options{ReadOnly: true, Timeout: 250 * time.Millisecond}) // a running watcher holds it for good
	switch {
	case err == nil:
		defer s.Close()
		body, err = localState(s, cfg, orderID)
	case errors.Is(err, state.ErrLocked):
		body, err = remoteState(ctx, cfg, orderID)
	case errors.Is(err, fs.ErrNotExist):
		err = fmt.Errorf("%w (set WATCHER_STATE_PATH to the watcher's state file)", err)
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher state:", err)
		return exitFail
	}
	if orderID != 0 || *asJSON {
		stdout.Write(body)
		return exitOK
	}
	var rep stateReport
	if err := json.Unmarshal(body, &rep); err != nil {
		fmt.Fprintln(stderr, "watcher state: reading the report:", err)
		return exitFail
	}
	printStateReport(stdout, rep, time.Now())
	return exitOK
}

var errNotTracked = errors.New("not tracked")

// localState reads the report or an order from the state file, as JSON.
func localState(s *state.Store, cfg *Config, orderID int64) ([]byte, error) {
	var v any
	if orderID == 0 {
		rep, err := newStateReport(s, cfg.StartFrom)
		if err != nil {
			return nil, err
		}
		rep.Timings = newTimingsReport(poller.NewTimings(poller.TimingsConfig{Settle: cfg.Settle, Overlap: cfg.Overlap, Records: s}).InForce())
		v = rep
	} else {
		rep, ok, err := lookupOrder(s, orderID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("order %d is %w in %s", orderID, errNotTracked, cfg.StatePath)
		}
		v = rep
	}
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}

// remoteState asks the watcher that holds the state file.
func remoteState(ctx context.Context, cfg *Config, orderID int64) ([]byte, error) {
	base := localURL(cfg.HTTPAddr)
	path := "/state"
	if orderID != 0 {
		path = fmt.Sprintf("/state/orders/%d", orderID)
	}
	code, body, err := getLocal(ctx, base, path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s is held by a running watcher, which did not answer at %s (%v): set WATCHER_HTTP_ADDR to its address", cfg.StatePath, base, err)
	case code == http.StatusNotFound && orderID != 0:
		return nil, fmt.Errorf("order %d is %w by the running watcher at %s", orderID, errNotTracked, base)
	case code != http.StatusOK:
		return nil, fmt.Errorf("%s is held by a running watcher; GET %s%s answered %d: %s", cfg.StatePath, base, path, code, bytes.TrimSpace(body))
	}
	return body, nil
}

func printStateReport(w io.Writer, rep stateReport, now time.Time) {
	ts := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%s (%s ago)", t.Format(time.RFC3339), now.Sub(t).Round(time.Second))
	}
	sync := "done"
	switch {
	case rep.FirstSync.Done:
	case rep.Baseline.IsZero():
		sync = "not started"
	default:
		sync = fmt.Sprintf("in progress: %.0f%%", 100*rep.FirstSync.Progress)
	}
	fmt.Fprintf(w, "state file     %s (%d bytes, schema %d)\n", rep.StateFile, rep.FileSizeBytes, rep.SchemaVersion)
	fmt.Fprintf(w, "watermark      %s\n", ts(rep.Watermark))
	fmt.Fprintf(w, "baseline       %s\n", ts(rep.Baseline))
	fmt.Fprintf(w, "first sync     %s\n", sync)
	fmt.Fprintf(w, "last sweep     %s\n", ts(rep.LastSweep))
	fmt.Fprintf(w, "orders         %d\n", rep.OrdersTracked)
	fmt.Fprintf(w, "outbox depth   %d\n", rep.OutboxDepth)
	printQuarantine(w, rep.Quarantine, now)
	printBudgetReport(w, rep, now) // budget.go
	printTimings(w, rep.Timings)
}
