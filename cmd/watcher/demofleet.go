package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/shops"
)

// demoOptions are the flags of `watcher demo`.
type demoOptions struct {
	shops, orders int
	rate          float64
	interval      time.Duration
	leave         time.Duration // the second member leaves after this long (0: never)
	verbose       bool
}

// runDemoFleet is `watcher demo -shops N`: one simulator serving N shops
// (tenants at /shops/<id>), a registry file naming them, an embedded NATS
// server and two fleet members (fleet.Serve, as `watcher run` in fleet
// mode) sharing the shops; it prints each event with its shop and a line
// whenever the shops' holders change. dir is its temporary directory.
func runDemoFleet(ctx context.Context, o demoOptions, dir string, stdout, stderr io.Writer) int {
	fail := func(what string, err error) int { fmt.Fprintf(stderr, "demo: %s%v\n", what, err); return exitFail }
	shopsOf, err := startDemoShops(o, dir)
	if err != nil {
		return fail("", err)
	}
	defer shopsOf.stop()
	tenants, simURL, registry := shopsOf.tenants, shopsOf.url, shopsOf.registry
	ns, err := startNATS(filepath.Join(dir, "jetstream"))
	if err != nil {
		return fail("NATS: ", err)
	}
	defer ns.Shutdown()
	natsURL := ns.ClientURL()

	level := map[bool]string{false: "error", true: "info"}[o.verbose] // a lost race for a shop and a move log warnings
	names, addrs, stops := []string{"member-1", "member-2"}, make([]string, 2), make([]context.CancelFunc, 2)
	ready := make(chan error, 4) // each member: Ready, then Serve's end
	var members sync.WaitGroup
	defer members.Wait()
	for i, name := range names {
		cfg := demoConfig(simURL, natsURL, "", o.interval)
		cfg.ShopsFile, cfg.StateDir, cfg.InstanceID = registry, filepath.Join(dir, name), name
		cfg.Lease, cfg.LeaseTTL, cfg.LeaseBucket = true, 9*time.Second, "orderwatch"
		cfg.HTTPAddr = freeAddr(fmt.Sprintf("127.0.0.1:%d", 9464+i))
		mctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		defer stop()
		members.Go(func() {
			err := fleet.Serve(mctx, cfg, fleet.ServeOptions{Logger: newLogger(stderr, "text", level).With("member", name),
				Registry: prometheus.NewRegistry(), Version: version, Getenv: demoPassword, Ready: func(addr string) { addrs[i] = addr; ready <- nil }})
			if err != nil {
				fmt.Fprintf(stderr, "demo: %s: %v\n", name, err)
			}
			ready <- err
		})
	}
	for range names {
		if err := <-ready; err != nil {
			return exitFail
		}
	}

	printFleetBanner(stdout, o, shopsOf, natsURL, names, addrs)
	if o.leave > 0 {
		defer time.AfterFunc(o.leave, func() {
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(stdout, "%s  %s leaves (as on SIGTERM): it gives its shops up\n", time.Now().Format("15:04:05"), names[1])
			stops[1]()
		}).Stop()
	}
	err = showEvents(ctx, natsURL, tenants, o.rate, fmt.Sprintf("the members made %%d calls to the %d shops", o.shops), stdout, func() error {
		printHolders(ctx, addrs[0], stdout)
		members.Wait()
		return nil
	})
	if err != nil {
		return fail("", err)
	}
	return exitOK
}

// demoShops are the demo fleet's simulated shops and their registry.
type demoShops struct {
	ids      []string
	tenants  []*plentysim.Server
	url      string // the simulator's base URL
	registry string // the registry file
	stop     func()
}

// startDemoShops serves o.shops simulated shops on loopback and writes their
// registry under dir.
func startDemoShops(o demoOptions, dir string) (demoShops, error) {
	sims := plentysim.NewMulti(o.shops, plentysim.Config{Seed: time.Now().UnixNano()})
	d := demoShops{ids: sims.IDs(), tenants: make([]*plentysim.Server, o.shops), registry: filepath.Join(dir, "shops.json")}
	for i, id := range d.ids {
		d.tenants[i] = sims.Tenant(id)
		d.tenants[i].Generate(o.orders, time.Now().Add(-30*24*time.Hour), time.Now().Add(-time.Minute))
	}
	url, stop, err := serveLocal(sims)
	if err != nil {
		return d, err
	}
	d.url, d.stop = url, stop
	list := make([]shops.Shop, len(d.ids))
	for i, id := range d.ids {
		list[i] = shops.Shop{ID: id, URL: url + plentysim.TenantPath(id), Username: "demo", PasswordEnv: "DEMO_PASSWORD"}
	}
	if err := shops.WriteFile(d.registry, list); err != nil {
		stop()
		return d, err
	}
	return d, nil
}

// printFleetBanner tells what the demo fleet runs and how to watch it.
func printFleetBanner(stdout io.Writer, o demoOptions, d demoShops, natsURL string, names, addrs []string) {
	ids := d.ids
	leaving := ""
	if o.leave > 0 {
		leaving = fmt.Sprintf("\n  %s leaves after %s: its shops move to %s with their state", names[1], o.leave, names[0])
	}
	fmt.Fprintf(stdout, `orderwatch demo: %d simulated shops, NATS and a fleet of two watcher members in one process; nothing leaves this machine.
  shops     %s%s ... %s  (user demo/demo, %d orders and %.3g changes/s each)
  registry  %s  (WATCHER_SHOPS_FILE of both members)
  NATS      %s  (JetStream stream ORDERS, subjects orders.<shop>.>)
  %s  http://%s/state  (members, fair share, who runs which shop)  /shops/<shop>/state  /metrics
  %s  http://%s/state%s
Watch with the nats CLI:  nats --server %s sub 'orders.>'          (one shop: 'orders.%s.>')
                          nats --server %s kv watch orderwatch_lease  (the shops' leases: which member holds which)
Consume them in Go (docs/consuming.md, examples/): go run ./examples/since -nats %s -prefix 'orders.*' -since 1h
A shop's orders in status 5 for over 48 h, from the member that runs it (the fleet: lines below):
  go run ./cmd/watcher state -url http://%s -shop %s -status 5 -older-than 48h
Events as they happen, with their shop (Ctrl-C to stop):
`, o.shops, d.url, plentysim.TenantPath(ids[0]), ids[len(ids)-1], o.orders, o.rate, d.registry, natsURL, names[0], addrs[0], names[1], addrs[1],
		leaving, natsURL, ids[0], natsURL, natsURL, addrs[0], ids[0])
}

// demoPassword is the demo's environment of the registry's passwordEnv.
func demoPassword(string) string { return "demo" }

// printHolders prints which member runs which shop (fleet.Report.Holders
// of the first member's GET /state: it never leaves) whenever that
// changes, until ctx ends.
func printHolders(ctx context.Context, addr string, w io.Writer) {
	last := ""
	for t := time.NewTicker(500 * time.Millisecond); ; {
		var rep fleet.Report
		code, body, err := pipeline.GetLocal(ctx, "http://"+addr, "/state")
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &rep) == nil && rep.Holders() != last {
			last = rep.Holders()
			fmt.Fprintf(w, "%s  fleet: %s\n", time.Now().Format("15:04:05"), last)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
