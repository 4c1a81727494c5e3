package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/shopid"
)

// runDemo is `watcher demo`: the simulator with a mutator, an embedded NATS
// server with JetStream, the watcher, and a subscriber printing each event
// as one line. Nothing leaves the machine.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	orders := fs.Int("orders", 300, "orders in the simulated shop (in each, with -shops)")
	rate := fs.Float64("rate", 1, "order changes per second (in each shop, with -shops)")
	interval := fs.Duration("interval", 2*time.Second, "poll interval")
	runFor := fs.Duration("for", 0, "stop after this long (0 = until Ctrl-C)")
	verbose := fs.Bool("v", false, "show the watcher's log (one line per sweep)")
	nShops := fs.Int("shops", 1, "simulated shops: 2 or more run a fleet of two watcher members sharing them (WATCHER_SHOPS_FILE mode); 1: one shop, one watcher")
	leave := fs.Duration("leave", 0, "with -shops: the second member leaves after this long, and its shops move to the first (0 = never)")
	if code, ok := parseArgs(fs, args, 0, stdout, stderr); !ok {
		return code
	}
	if set := setVars(os.Environ()); len(set) > 0 {
		fmt.Fprintf(stderr, "demo: the demo configures itself and ignores %s (its flags: watcher demo -h)\n", strings.Join(set, ", "))
	}
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}
	dir, err := os.MkdirTemp("", "orderwatch-demo-")
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitFail
	}
	defer os.RemoveAll(dir)
	o := demoOptions{shops: *nShops, orders: *orders, rate: *rate, interval: *interval, leave: *leave, verbose: *verbose}
	if o.shops > 1 {
		return runDemoFleet(ctx, o, dir, stdout, stderr)
	}
	return runDemoShop(ctx, o, dir, stdout, stderr)
}

// runDemoShop is `watcher demo`: a simulated shop, an embedded NATS server
// and one watcher; it prints each event. dir is its temporary directory.
func runDemoShop(ctx context.Context, o demoOptions, dir string, stdout, stderr io.Writer) int {
	// The simulated shop.
	sim := plentysim.New(plentysim.Config{Seed: time.Now().UnixNano()})
	sim.Generate(o.orders, time.Now().Add(-30*24*time.Hour), time.Now().Add(-time.Minute))
	simURL, stopSim, err := serveLocal(sim)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitFail
	}
	defer stopSim()

	// NATS with JetStream, on 4222 when it is free.
	ns, err := startNATS(filepath.Join(dir, "jetstream"))
	if err != nil {
		fmt.Fprintln(stderr, "demo: NATS:", err)
		return exitFail
	}
	defer ns.Shutdown()
	natsURL := ns.ClientURL()

	cfg := demoConfig(simURL, natsURL, filepath.Join(dir, "state.db"), o.interval)
	level := "warn"
	if o.verbose {
		level = "info"
	}
	d, err := newDaemon(cfg, newLogger(stderr, "text", level))
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitFail
	}
	defer d.Close() // Run closes it; this when the demo ends before

	web := d.HTTPURL()
	fmt.Fprintf(stdout, `orderwatch demo: a simulated shop, NATS and the watcher in one process; nothing leaves this machine.
  shop      %s  (user demo/demo, %d orders, %.3g changes/s)
  NATS      %s  (JetStream stream ORDERS, subjects orders.>)
  watcher   %s/metrics  %s/readyz  (a sweep every %s)
  state     %s/state/orders?status=5&olderThan=48h  (every order's tracked state, paged)
Watch with the nats CLI:  nats --server %s sub 'orders.>'
                          nats --server %s stream view ORDERS
In another terminal of this clone (docs/consuming.md, examples/):
  go run ./examples/since -nats %s -since 1h        # the last hour's events, then exit
  go run ./examples/durable -nats %s                # a durable consumer: stop it, start it again, nothing is lost
  go run ./examples/alert-webhook -nats %s -status 7 -webhook <URL>   # one line per order entering status 7
  go run ./cmd/watcher state -url %s -status 5 -older-than 48h        # orders in status 5 for over 48 h
Events as they happen (Ctrl-C to stop):
`, simURL, o.orders, o.rate, natsURL, web, web, o.interval, web, natsURL, natsURL, natsURL, natsURL, natsURL, web)

	err = showEvents(ctx, natsURL, []*plentysim.Server{sim}, o.rate, "the watcher made %d calls to the shop", stdout, func() error { return d.Run(ctx) })
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitFail
	}
	return exitOK
}

// showEvents prints every event published on natsURL (with its shop when
// there are several shops) while the simulators change orders and work
// runs, then the demo's summary line (calls: its middle part, see
// eventTally.summary). work returns when ctx ends.
func showEvents(ctx context.Context, natsURL string, sims []*plentysim.Server, rate float64, calls string, stdout io.Writer, work func() error) error {
	started := time.Now()
	tally := &eventTally{orders: map[string]bool{}}
	sub, err := printEvents(natsURL, stdout, tally, len(sims) > 1)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer sub.Close()
	var wg sync.WaitGroup
	for _, sim := range sims {
		wg.Go(func() { sim.RunMutator(ctx, plentysim.MutatorConfig{Rate: rate}) })
	}
	err = work()
	wg.Wait()
	drain(sub, 2*time.Second)
	var st plentysim.Stats
	for _, sim := range sims {
		s := sim.Stats()
		st.Calls, st.LoginCalls = st.Calls+s.Calls, st.LoginCalls+s.LoginCalls
	}
	fmt.Fprintln(stdout, tally.summary(st, calls, time.Since(started)))
	return err
}

// eventTally counts what the demo printed, for its summary line.
type eventTally struct {
	mu     sync.Mutex
	events int
	orders map[string]bool // shop/order id
}

func (t *eventTally) add(shop string, orderID int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events++
	t.orders[fmt.Sprintf("%s/%d", shop, orderID)] = true
}

// summary is the demo's last line: "summary: 12 events printed for 9
// orders; the watcher made 31 calls to the shop (1 login) in 40s"; calls
// is the middle part's format, with the calls' %d.
func (t *eventTally) summary(st plentysim.Stats, calls string, took time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	logins := "logins"
	if st.LoginCalls == 1 {
		logins = "login"
	}
	return fmt.Sprintf("summary: %d events printed for %d orders; "+calls+" (%d %s) in %s",
		t.events, len(t.orders), st.Calls, st.LoginCalls, logins, took.Round(time.Second))
}

// drain lets the subscriber print the events already on their way.
func drain(nc *nats.Conn, limit time.Duration) {
	if nc.Drain() != nil {
		return
	}
	for deadline := time.Now().Add(limit); !nc.IsClosed() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

// demoConfig is the watcher's configuration in the demo: short delays so a
// change shows within seconds.
func demoConfig(simURL, natsURL, statePath string, interval time.Duration) *Config {
	return &Config{
		PlentyURL: simURL, PlentyUsername: "demo", PlentyPassword: "demo", PlentyAPIVendor: "service", PlentyTimeout: 10 * time.Second,
		NATSURL: natsURL, Stream: "ORDERS", StreamCreate: true, DuplicateWindow: 10 * time.Minute, StreamReplicas: 1,
		SubjectPrefix: "orders", PublishInFlight: 256, StatePath: statePath, OutboxMax: 100000,
		PollInterval: interval, Settle: time.Second, Overlap: 5 * time.Second, StartFrom: StartFrom{Back: 30 * 24 * time.Hour},
		CallShare: 0.25, ItemsPerPage: 250, SlicePages: 4, Keyset: "auto", BadEntries: "quarantine",
		// Relations with coded values, so the events show data.labels.
		With:     []string{"addresses", "amounts", "payments"},
		HTTPAddr: freeAddr(demoHTTPAddr), LogFormat: "text", LogLevel: "warn", ShutdownTimeout: 5 * time.Second,
	}
}

// demoHTTPAddr is where the demo's watcher serves /metrics, /readyz and
// /state: not 9090, the port a local Prometheus listens on by default (so a
// Prometheus on the same machine can scrape the demo), and not 8080 (the
// simulator's port in the README's real-shop recipe).
const demoHTTPAddr = "127.0.0.1:9464"

// serveLocal serves h on a free port of the loopback (the simulator).
func serveLocal(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// freeAddr returns addr when it can be listened on, else a random port.
func freeAddr(addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	ln.Close()
	return addr
}

func startNATS(storeDir string) (*server.Server, error) {
	opts := server.Options{Host: "127.0.0.1", Port: 4222, JetStream: true, StoreDir: storeDir, NoSigs: true, NoLog: true}
	if ln, err := net.Listen("tcp", "127.0.0.1:4222"); err != nil {
		opts.Port = server.RANDOM_PORT
	} else {
		ln.Close()
	}
	ns, err := server.NewServer(&opts)
	if err != nil {
		return nil, err
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("NATS did not start")
	}
	return ns, nil
}

// printEvents subscribes to every event and prints it as one line (with
// withShop, the shop's id first: the Orderwatch-Shop header).
func printEvents(url string, w io.Writer, tally *eventTally, withShop bool) (*nats.Conn, error) {
	nc, err := nats.Connect(url, nats.Name("orderwatch-demo-subscriber"))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	_, err = nc.Subscribe("orders.>", func(m *nats.Msg) {
		line, shop := describeEvent(m.Data), m.Header.Get(shopid.Header)
		tally.add(shop, eventOrderID(m.Data))
		if withShop {
			line = fmt.Sprintf("%-10s %s", shop, line)
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s  %-60s %s\n", time.Now().Format("15:04:05"), line, m.Subject)
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nc.Flush()
}

// eventOrderID is the order id of an event (0 when unreadable).
func eventOrderID(data []byte) int64 {
	var ev events.Event
	_ = json.Unmarshal(data, &ev)
	return ev.Data.OrderID
}

// describeEvent renders an event for a person: "#1042 status 5 -> 7 (unlocked)".
// It reads what it can of the event (the demo's own events; no validation).
func describeEvent(data []byte) string {
	var ev events.Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return "unreadable event: " + err.Error()
	}
	a, b := ev.Data.After, ev.Data.Before
	id := fmt.Sprintf("#%d", ev.Data.OrderID)
	switch ev.Type {
	case events.Created, events.Discovered:
		return fmt.Sprintf("%s %s (status %s, %s)%s", id, strings.TrimPrefix(string(ev.Type), "order."), a.StatusID, a.LockStatus, labelsText(ev.Data.Labels))
	case events.StatusChanged:
		if b != nil {
			return fmt.Sprintf("%s status %s -> %s (%s)", id, b.StatusID, a.StatusID, a.LockStatus)
		}
	case events.LockChanged:
		if b != nil {
			return fmt.Sprintf("%s lock %s -> %s (status %s)", id, b.LockStatus, a.LockStatus, a.StatusID)
		}
	case events.Updated:
		return fmt.Sprintf("%s updated (status %s)", id, a.StatusID)
	}
	return fmt.Sprintf("%s %s", id, ev.Type)
}

// labelsText is the part of data.labels the demo prints: " [DE, EUR,
// payment Captured]", empty when the event has no labels.
func labelsText(l *events.Labels) string {
	if l == nil {
		return ""
	}
	var parts []string
	for _, c := range l.Countries {
		parts = append(parts, c.ISO)
	}
	slices.Sort(parts)
	parts = slices.Compact(parts)
	parts = append(parts, slices.Sorted(maps.Keys(l.Currencies))...)
	for _, k := range slices.Sorted(maps.Keys(l.PaymentStatuses)) {
		parts = append(parts, "payment "+l.PaymentStatuses[k].Name)
	}
	if len(parts) == 0 {
		return ""
	}
	return " [" + strings.Join(parts, ", ") + "]"
}
