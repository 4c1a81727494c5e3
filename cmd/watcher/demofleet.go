package main

import (
	"context"
	"encoding/json"
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

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/shops"
)

// demoFleet are the flags of `watcher demo -shops N`.
type demoFleet struct {
	shops, orders int
	rate          float64
	interval      time.Duration
	leave         time.Duration // member-2 leaves after this long (0: never)
	verbose       bool
}

// demoMembers names the fleet's members in the demo.
var demoMembers = []string{"member-1", "member-2"}

// runDemoFleet is `watcher demo -shops N`: one simulator serving N shops
// (tenants at /shops/<id>), a registry file naming them, an embedded NATS
// server and two fleet members (fleet.Serve, as `watcher run` in fleet
// mode) sharing the shops; it prints each event with its shop and a line
// whenever the shops' holders change. ctx ends it; dir is its temporary
// directory.
func runDemoFleet(ctx context.Context, o demoFleet, dir string, stdout, stderr io.Writer) int {
	sims := plentysim.NewMulti(o.shops, plentysim.Config{Seed: time.Now().UnixNano()})
	for _, id := range sims.IDs() {
		sims.Tenant(id).Generate(o.orders, time.Now().Add(-30*24*time.Hour), time.Now().Add(-time.Minute))
	}
	simLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitFail
	}
	simSrv := &http.Server{Handler: sims, ReadHeaderTimeout: 5 * time.Second}
	go simSrv.Serve(simLn)
	defer simSrv.Close()
	simURL := "http://" + simLn.Addr().String()

	registry, err := writeDemoRegistry(dir, simURL, sims.IDs())
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitFail
	}
	ns, err := startNATS(filepath.Join(dir, "jetstream"))
	if err != nil {
		fmt.Fprintln(stderr, "demo: NATS:", err)
		return exitFail
	}
	defer ns.Shutdown()
	natsURL := ns.ClientURL()

	level := "warn"
	if o.verbose {
		level = "info"
	}
	log := newLogger(stderr, "text", level)
	var members sync.WaitGroup
	addrs := make([]string, len(demoMembers))
	ready := make(chan error, 2*len(demoMembers)) // Ready, then Serve's end
	stops := make([]context.CancelFunc, len(demoMembers))
	for i, name := range demoMembers {
		cfg := demoConfig(simURL, natsURL, "", o.interval)
		cfg.ShopsFile, cfg.StateDir = registry, filepath.Join(dir, name)
		cfg.Lease, cfg.LeaseTTL, cfg.LeaseBucket, cfg.InstanceID = true, 9*time.Second, "orderwatch", name
		cfg.HTTPAddr = freeAddr(fmt.Sprintf("127.0.0.1:%d", 9464+i))
		mctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		defer stop()
		members.Go(func() {
			err := fleet.Serve(mctx, cfg, fleet.ServeOptions{Logger: log.With("member", name), Registry: prometheus.NewRegistry(), Version: version,
				Ready: func(addr string) { addrs[i] = addr; ready <- nil }})
			if err != nil {
				fmt.Fprintf(stderr, "demo: %s: %v\n", name, err)
			}
			ready <- err // unblocks the wait below when Serve failed before Ready
		})
	}
	defer members.Wait()
	for range demoMembers {
		if err := <-ready; err != nil {
			return exitFail
		}
	}

	fmt.Fprintf(stdout, `orderwatch demo: %d simulated shops, NATS and a fleet of two watcher members in one process; nothing leaves this machine.
  shops     %s%s ... %s  (user demo/demo, %d orders and %.3g changes/s each)
  registry  %s  (WATCHER_SHOPS_FILE of both members)
  NATS      %s  (JetStream stream ORDERS, subjects orders.<shop>.>)
  %s  http://%s/state  (the fleet: members, fair share, who runs which shop)  /shops/<shop>/state  /metrics
  %s  http://%s/state
`, o.shops, simURL, plentysim.TenantPath(sims.IDs()[0]), sims.IDs()[o.shops-1], o.orders, o.rate,
		registry, natsURL, demoMembers[0], addrs[0], demoMembers[1], addrs[1])
	if o.leave > 0 {
		fmt.Fprintf(stdout, "  %s leaves after %s: its shops move to %s with their state\n", demoMembers[1], o.leave, demoMembers[0])
	}
	fmt.Fprintf(stdout, `Watch with the nats CLI:  nats --server %s sub 'orders.>'          (one shop: 'orders.%s.>')
                          nats --server %s kv watch orderwatch_lease  (the shops' leases: which member holds which)
Consume them in Go (docs/consuming.md, examples/): go run ./examples/since -nats %s -since 1h
Events as they happen, with their shop (Ctrl-C to stop):
`, natsURL, sims.IDs()[0], natsURL, natsURL)

	started := time.Now()
	tally := &eventTally{orders: map[string]bool{}}
	sub, err := printEvents(natsURL, stdout, tally, true)
	if err != nil {
		fmt.Fprintln(stderr, "demo: subscribe:", err)
		return exitFail
	}
	defer sub.Close()
	var wg sync.WaitGroup
	for _, id := range sims.IDs() {
		wg.Go(func() { sims.Tenant(id).RunMutator(ctx, plentysim.MutatorConfig{Rate: o.rate}) })
	}
	wg.Go(func() { printHolders(ctx, addrs, stdout) })
	if o.leave > 0 {
		wg.Go(func() {
			select {
			case <-ctx.Done():
			case <-time.After(o.leave):
				fmt.Fprintf(stdout, "%s  %s leaves (as on SIGTERM): it gives its shops up\n", time.Now().Format("15:04:05"), demoMembers[1])
				stops[1]()
			}
		})
	}
	wg.Wait()
	members.Wait()
	drain(sub, 2*time.Second)
	var st plentysim.Stats
	for _, id := range sims.IDs() {
		s := sims.Tenant(id).Stats()
		st.Calls, st.LoginCalls = st.Calls+s.Calls, st.LoginCalls+s.LoginCalls
	}
	fmt.Fprintln(stdout, tally.summary(st, fmt.Sprintf("the members made %%d calls to the %d shops", o.shops), time.Since(started)))
	return exitOK
}

// writeDemoRegistry writes the registry of the demo's shops (the password
// in a file next to it, as a mounted Secret would be).
func writeDemoRegistry(dir, simURL string, ids []string) (string, error) {
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("demo"), 0o600); err != nil {
		return "", err
	}
	var f struct {
		Shops []shops.Shop `json:"shops"`
	}
	for _, id := range ids {
		f.Shops = append(f.Shops, shops.Shop{ID: id, URL: simURL + plentysim.TenantPath(id), Username: "demo", PasswordFile: pw})
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "shops.json")
	return path, os.WriteFile(path, b, 0o600)
}

// printHolders prints which member runs which shop whenever that changes,
// from the first member's report that answers (GET /state of the fleet).
func printHolders(ctx context.Context, addrs []string, w io.Writer) {
	last := ""
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if line := holders(ctx, addrs); line != "" && line != last {
			fmt.Fprintf(w, "%s  fleet: %s\n", time.Now().Format("15:04:05"), line)
			last = line
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// holders is "member-1 runs shop-001, shop-003; member-2 runs shop-002",
// with the shops no member holds at the end ("free: shop-004"), from the
// report of the first member that answers; "" when none does.
func holders(ctx context.Context, addrs []string) string {
	for _, a := range addrs {
		code, body, err := pipeline.GetLocal(ctx, "http://"+a, "/state")
		var rep fleet.Report
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &rep) != nil {
			continue
		}
		by := map[string][]string{}
		for _, s := range rep.Shops {
			h := s.Holder
			if h == "" {
				h = "free:"
			}
			by[h] = append(by[h], s.ID)
		}
		var parts []string
		for _, h := range slices.Sorted(maps.Keys(by)) {
			if h != "free:" {
				parts = append(parts, h+" runs "+strings.Join(by[h], ", "))
			}
		}
		if free := by["free:"]; len(free) > 0 {
			parts = append(parts, "free: "+strings.Join(free, ", "))
		}
		return strings.Join(parts, "; ")
	}
	return ""
}
