// Command plentysim serves a simulated commerce REST service (package
// plentysim) on a real HTTP address: a test server for anyone who needs the
// order search of the service without a real system.
//
// Run it:
//
//	go run ./cmd/plentysim -addr 127.0.0.1:8080 -orders 5000 -rate 2
//
// It prints one line with the base URL, the username and the password,
// then serves until SIGINT or SIGTERM and shuts down gracefully. With
// -shops N it serves N systems (tenants) in one process, each under its
// own base path /shops/<id> (shop-001 ...) with its own orders, quota,
// sessions, faults and mutator, and prints one line per shop:
// "shop <id> <base URL>".
//
// What it answers:
//
//	POST /rest/login             {"username":"demo","password":"demo"} (JSON or form) -> token response
//	POST /rest/login/refresh     {"refresh_token":"..."} -> new tokens for the same session
//	GET  /rest/orders/search     simple filters in the query string
//	POST /rest/orders/search     simple filters in the query string plus a complex filter group as JSON body
//	anything else                404 {"error":{"message":"Not Found","code":404}}
//
// Try it:
//
//	TOKEN=$(curl -s -X POST localhost:8080/rest/login -H 'Content-Type: application/json' \
//	  -d '{"username":"demo","password":"demo"}' | sed 's/.*"access_token":"\([^"]*\)".*/\1/')
//	curl -si -H "Authorization: Bearer $TOKEN" \
//	  'localhost:8080/rest/orders/search?statusId=between:5,7&sortOrder=asc&itemsPerPage=5'
//
// At start it generates -orders orders created over the last -span (statuses
// with decimals such as 5.1 and 11.1, locks, null owners, items, properties,
// relations), then a mutator changes -rate orders per second (status, lock,
// new orders, touches, by the -*-weight flags). Every response carries the
// throttle headers of the real service; exceeding a limit answers 429 with
// Retry-After. The -fault-* flags inject 500s, 502 HTML pages, truncated or
// invalid JSON and dropped connections into searches; -latency and
// -slow-rate/-slow-delay slow them down. -v logs every request and mutation
// to stderr. All randomness follows -seed.
//
// Flags (defaults in brackets; see -h):
//
//	-addr [127.0.0.1:8080]  -shops [0]  -username [demo]  -password [demo]
//	-orders [1000]  -span [720h]  -seed [1]
//	-rate [1]  -status-weight [6]  -lock-weight [2]  -create-weight [2]  -touch-weight [0]
//	-statuses [3,4,5,5.1,6,7,7.01,8,9,11.1]
//	-token-ttl [24h]  -max-sessions [3]  -login-style [snake|camel|both]  -disable-refresh
//	-status-style [number|string|mixed]  -page-as-string  -location [Europe/Berlin]
//	-items-per-page [50]  -max-items-per-page [250]
//	-short-limit [200]  -short-period [20s]  -long-limit [166000]  -long-period [24h]
//	-route-limit [0]  -route-period [60s]  -search-cost [1]
//	-fault-server-error  -fault-html  -fault-truncate  -fault-garbage  -fault-drop  [0..1, 0]
//	-latency [0]  -slow-rate [0]  -slow-delay [0]  -v
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line flags.
type options struct {
	addr     string
	shops    int // 0: one system at /rest; N: N tenants at /shops/<id>/rest
	orders   int
	span     time.Duration
	statuses string
	location string
	verbose  bool
	cfg      plentysim.Config
	mutator  plentysim.MutatorConfig
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	c := &o.cfg
	m := &o.mutator
	fs := flag.NewFlagSet("plentysim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: plentysim [flags]\n\nServes a simulated commerce REST service (login, order search) until SIGINT/SIGTERM.")
		fs.PrintDefaults()
	}

	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address (port 0 picks a free port)")
	fs.IntVar(&o.shops, "shops", 0, "serve this many systems (tenants), each at /shops/<id> with its own orders, quota, sessions and faults (0: one system at /)")
	fs.IntVar(&o.orders, "orders", 1000, "orders generated at start (per system)")
	fs.DurationVar(&o.span, "span", 30*24*time.Hour, "the generated orders are created over this span up to now")
	fs.BoolVar(&o.verbose, "v", false, "log every request and mutation to stderr")

	fs.StringVar(&c.Username, "username", "demo", "login username")
	fs.StringVar(&c.Password, "password", "demo", "login password")
	fs.DurationVar(&c.TokenTTL, "token-ttl", 24*time.Hour, "access token lifetime (expires_in)")
	fs.IntVar(&c.MaxSessions, "max-sessions", 3, "concurrent sessions allowed")
	fs.StringVar((*string)(&c.LoginStyle), "login-style", "snake", "token response keys: snake, camel or both")
	fs.BoolVar(&c.DisableRefresh, "disable-refresh", false, "answer POST /rest/login/refresh with 404")
	fs.StringVar((*string)(&c.StatusStyle), "status-style", "number", "statusId/referrerId as JSON number, string, or mixed per order")
	fs.BoolVar(&c.PageAsString, "page-as-string", false, `envelope "page" as a string`)
	fs.IntVar(&c.DefaultItemsPerPage, "items-per-page", 50, "default itemsPerPage")
	fs.IntVar(&c.MaxItemsPerPage, "max-items-per-page", 250, "silent cap of itemsPerPage")
	fs.StringVar(&o.location, "location", "Europe/Berlin", "time zone of rendered timestamps")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of generator, mutator and faults")

	l := &c.Limits
	fs.IntVar(&l.ShortLimit, "short-limit", 200, "calls per short period per user")
	fs.DurationVar(&l.ShortPeriod, "short-period", 20*time.Second, "short period")
	fs.IntVar(&l.LongLimit, "long-limit", 166000, "calls per long period per system")
	fs.DurationVar(&l.LongPeriod, "long-period", 24*time.Hour, "long period")
	fs.IntVar(&l.RouteLimit, "route-limit", 0, "calls of the search route per route period per user (0: no route limit)")
	fs.DurationVar(&l.RoutePeriod, "route-period", 60*time.Second, "route period")
	fs.IntVar(&l.SearchCost, "search-cost", 1, "calls one search counts for")

	f := &c.Faults
	fs.Float64Var(&f.ServerErrorRate, "fault-server-error", 0, "probability of a 500 on a search")
	fs.Float64Var(&f.HTMLRate, "fault-html", 0, "probability of a 502 HTML page on a search")
	fs.Float64Var(&f.TruncateRate, "fault-truncate", 0, "probability of a truncated page body")
	fs.Float64Var(&f.GarbageRate, "fault-garbage", 0, "probability of invalid JSON")
	fs.Float64Var(&f.DropRate, "fault-drop", 0, "probability of a dropped connection mid-body")
	fs.DurationVar(&f.Latency, "latency", 0, "latency added to every search")
	fs.Float64Var(&f.SlowRate, "slow-rate", 0, "probability of an extra -slow-delay on a search")
	fs.DurationVar(&f.SlowDelay, "slow-delay", 0, "extra delay of a slow search")

	fs.Float64Var(&m.Rate, "rate", 1, "mutations per second (0: no mutator)")
	fs.Float64Var(&m.StatusWeight, "status-weight", 6, "weight of status changes")
	fs.Float64Var(&m.LockWeight, "lock-weight", 2, "weight of lock changes")
	fs.Float64Var(&m.CreateWeight, "create-weight", 2, "weight of new orders")
	fs.Float64Var(&m.TouchWeight, "touch-weight", 0, "weight of updatedAt-only changes")
	fs.StringVar(&o.statuses, "statuses", "3,4,5,5.1,6,7,7.01,8,9,11.1", "comma-separated statuses the mutator moves orders between")

	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	loc, err := time.LoadLocation(o.location)
	if err != nil {
		return o, fmt.Errorf("-location: %w", err)
	}
	c.Location = loc
	m.Statuses = strings.Split(o.statuses, ",")
	if o.orders < 0 || o.span < 0 || o.shops < 0 {
		return o, errors.New("-orders, -span and -shops must not be negative")
	}
	if err := c.Validate(); err != nil {
		return o, err
	}
	if err := m.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// run serves until ctx is done. It returns the exit code: 0 after a
// graceful shutdown, 1 when serving failed, 2 for bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "plentysim:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "plentysim")

	sims, handler := o.simulators()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		fmt.Fprintln(stderr, "plentysim:", err)
		return 1
	}
	if o.verbose {
		handler = logRequests(handler, log)
		o.mutator.OnChange = func(c plentysim.Change) {
			log.Info("mutation", "order", c.OrderID, "kind", c.Kind, "from", c.From, "to", c.To, "updatedAt", c.At.Format(time.RFC3339))
		}
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	o.printServing(stdout, ln.Addr())
	var wg sync.WaitGroup
	mctx, stopMutator := context.WithCancel(ctx)
	defer stopMutator()
	if o.mutator.Rate > 0 {
		for _, sim := range sims {
			wg.Go(func() { sim.RunMutator(mctx, o.mutator) })
		}
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	code := 0
	select {
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			log.Error("shutdown", "err", err)
			code = 1
		}
		<-served
	case err := <-served:
		log.Error("serve", "err", err)
		code = 1
	}
	stopMutator()
	wg.Wait()
	return code
}

// simulators are the simulated shops of o, with their orders generated, and
// the handler serving them (one shop, or tenants under /shops/<id>).
func (o options) simulators() ([]*plentysim.Server, http.Handler) {
	now := time.Now()
	var sims []*plentysim.Server
	var handler http.Handler
	if o.shops == 0 {
		sim := plentysim.New(o.cfg)
		sims, handler = []*plentysim.Server{sim}, sim
	} else {
		tenants := plentysim.NewMulti(o.shops, o.cfg)
		for _, id := range tenants.IDs() {
			sims = append(sims, tenants.Tenant(id))
		}
		handler = tenants
	}
	for _, sim := range sims {
		sim.Generate(o.orders, now.Add(-o.span), now)
	}
	return sims, handler
}

// printServing tells where the shops are served and their credentials.
func (o options) printServing(stdout io.Writer, addr net.Addr) {
	if o.shops == 0 {
		fmt.Fprintf(stdout, "plentysim: serving http://%s username=%s password=%s orders=%d\n",
			addr, o.cfg.Username, o.cfg.Password, o.orders)
	} else {
		fmt.Fprintf(stdout, "plentysim: serving %d shops on http://%s username=%s password=%s orders=%d each\n",
			o.shops, addr, o.cfg.Username, o.cfg.Password, o.orders)
		for i := range o.shops {
			id := plentysim.TenantName(i, o.shops)
			fmt.Fprintf(stdout, "shop %s http://%s%s\n", id, addr, plentysim.TenantPath(id))
		}
	}

}

// logRequests logs method, path, query, status and duration of every request.
func logRequests(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			log.Info("request", "method", r.Method, "path", r.URL.Path, "query", r.URL.RawQuery,
				"status", rec.status, "duration", time.Since(start).Round(time.Microsecond))
		}()
		next.ServeHTTP(rec, r)
	})
}

// statusRecorder remembers the status code; Unwrap keeps hijacking (the
// dropped-connection fault) and flushing available.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
