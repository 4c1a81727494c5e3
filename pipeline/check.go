package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// TryCredentials is how Check's report says to try the credentials when
// it reused a stored session (a fleet's check says it its own way).
const TryCredentials = "check with an empty WATCHER_STATE_PATH, which opens one more session"

// Check is `watcher check` after the configuration loaded: when no
// watcher runs on the state file, it opens it, logs in (or reuses the
// stored session) and searches once, keeping the session in the file for
// `watcher run`; when a watcher holds the file, it asks that watcher over
// HTTP instead and opens no session; then it connects to NATS and checks
// the stream, the server and the lease. It says first how the scope was
// split, writes a line per check to w, and reports whether all passed.
// version names the binary in its User-Agent.
func Check(ctx context.Context, cfg *Config, version string, w io.Writer) (passed bool) {
	stdout := w
	failed := false
	report := func(err error, okText, failText string) {
		if err != nil {
			failed = true
			fmt.Fprintf(stdout, "FAIL %s: %v\n", failText, err)
			return
		}
		fmt.Fprintf(stdout, "ok   %s\n", okText)
	}
	scope, _ := cfg.ScopeSplit()
	WriteScope(stdout, scope)

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var store *state.Store
	var err error
	if cfg.StatePath != "" {
		store, err = state.Open(cfg.StatePath, state.Options{Timeout: 200 * time.Millisecond, OutboxMax: cfg.OutboxMax})
	}
	switch {
	case cfg.StatePath == "":
		// The documented way to try the password: a session of its own,
		// kept nowhere (it stays open on the service until it expires).
		report(nil, "no state file (WATCHER_STATE_PATH is empty): the session, the login guard and the service's waits are kept in memory only; this login opens a session of its own", "")
		checkService(ctx, cfg, version, scope, &memoryStore{recs: map[string][]byte{}},
			"the session is kept in memory only (open on the service until it expires; `watcher run` does not see it)", stdout, report)
	case errors.Is(err, state.ErrLocked):
		checkRunning(ctx, cfg, stdout, report)
		fmt.Fprintln(stdout, "WARN password not tried: a watcher runs on this state file, and a login of check's own would open a second session")
	case err != nil:
		report(StateOpenError(cfg.StatePath, err), "", "state file (no login without a place to keep the session)")
	default:
		report(nil, "state file "+cfg.StatePath+" (no watcher running on it)", "")
		checkService(ctx, cfg, version, scope, store, "the session is kept in the state file for `watcher run`", stdout, report)
		if err := store.Close(); err != nil {
			report(err, "", "state file")
		}
	}

	// One pass over the servers, an answer now: `watcher run` is the one
	// that waits for NATS (and retries for as long as it runs).
	conn := cfg.NATS("orderwatch-check")
	conn.NoRetryAtStart = true
	nc, err := publisher.Connect(conn)
	if err == nil {
		defer nc.Close()
	}
	failText, err := NATSConnectError(cfg.NATSURL, err)
	report(err, "connected to NATS at "+publisher.RedactURL(cfg.NATSURL), failText)
	if err == nil {
		if cfg.Stream == "" {
			fmt.Fprintln(stdout, "WARN WATCHER_STREAM is empty: core NATS mode, nothing kept (a subscriber that is not connected misses events; a connected one may see an event twice after a failed flush)")
		} else {
			pub, err := publisher.New(nc, emptyOutbox{}, publisher.Config{
				Stream: cfg.Stream, CreateStream: false, SubjectPrefix: cfg.SubjectPrefix,
				DuplicateWindow: cfg.DuplicateWindow, MaxAge: cfg.StreamMaxAge,
			})
			if err == nil {
				err = pub.EnsureStream(ctx)
			}
			if err != nil && cfg.StreamCreate && errors.Is(err, jetstream.ErrStreamNotFound) {
				// Not a failure: `watcher run` creates it (its error text
				// speaks of creation being disabled, which is not the case).
				fmt.Fprintf(stdout, "ok   stream %s does not exist yet: the watcher creates it at start (WATCHER_STREAM_CREATE=true), capturing %s.> with a duplicate window of %s\n",
					cfg.Stream, cfg.SubjectPrefix, cfg.DuplicateWindow)
			} else {
				report(err, fmt.Sprintf("stream %s captures %s.> with a duplicate window", cfg.Stream, cfg.SubjectPrefix), "stream "+cfg.Stream)
			}
			f, err := serverFeatures(ctx, nc)
			report(err, "NATS server "+f.Version+fmt.Sprintf(" (JetStream API level %d)", f.APILevel), "NATS server "+f.Version)
			WriteLacks(stdout, f)
			if cfg.Lease {
				checkLease(ctx, cfg, nc, stdout)
			}
		}
	}
	return !failed
}

// LocalURL is the base URL of a watcher listening on addr, seen from this
// machine (or pod): ":9090" and "0.0.0.0:9090" are reached on loopback.
func LocalURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// GetLocal makes a GET to a running watcher's HTTP endpoint.
func GetLocal(ctx context.Context, base, path string) (int, []byte, error) {
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

// WriteScope says how the scope was split: what the service filters, what
// orderwatch evaluates on before and after of every change.
func WriteScope(w io.Writer, sp diff.ScopeSplit) {
	if len(sp.Sent) == 0 && sp.SentGroup == nil && sp.Local == nil {
		fmt.Fprintln(w, "ok   scope: every order (WATCHER_SCOPE and WATCHER_SCOPE_JSON are empty)")
		return
	}
	sent := ScopeSentText(sp)
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

// checkService logs in with the session kept in store (a new login only
// when it holds no live one; with the state file, the new session is
// stored there for `watcher run`) and searches once. kept says where a new
// session went, for the login line.
func checkService(ctx context.Context, cfg *Config, version string, scope diff.ScopeSplit, store checkStore, kept string, stdout io.Writer, report func(error, string, string)) {
	before, _ := store.LoadToken(ctx)
	logins := 0 // login requests made (none: a stored or handed-over session was used)
	// Bound like `watcher run` by what the state file holds (the login
	// guard, the service's pending wait), and leaving to it what it learns.
	client, err := plenty.New(plenty.Config{
		BaseURL: cfg.PlentyURL, Username: cfg.PlentyUsername, Password: cfg.PlentyPassword,
		APIVersion: cfg.PlentyAPIVersion, APIVendor: cfg.PlentyAPIVendor, Timeout: cfg.PlentyTimeout,
		UserAgent: "orderwatch-check/" + version,
		Tokens:    store, Sessions: store, Waits: store, NoRenew: true, Retry: plenty.RetryConfig{MaxElapsed: 20 * time.Second},
		OnLogin: func(plenty.LoginResult) { logins++ },
	})
	if err != nil {
		report(err, "", "client")
		return
	}
	if w, ok := client.Pacer().Pending(); ok { // restored from the state file
		fmt.Fprintf(stdout, "WARN login and order search not tried: %s (%s); `watcher run` waits for it too\n", PausedText(w), w.Why)
		return
	}
	err = client.Login(ctx)
	after, _ := store.LoadToken(ctx)
	okText := "logged in to " + cfg.PlentyURL + " as " + cfg.PlentyUsername + "; " + kept
	reused := after.AccessToken != "" && logins == 0
	switch {
	case reused && before.AccessToken != after.AccessToken:
		okText = "the shop's session handed over in the state file (sealed, record " + plenty.SealedSessionRecord + ") is live: reused it, no login"
	case reused:
		okText = "session stored in the state file is live: reused it, no login"
	}
	report(err, okText, "login")
	if err != nil {
		return
	}
	if reused {
		// The service checks a password only by opening a session; a second
		// one beside the stored session would count against the shop's
		// limit for the token's lifetime.
		fmt.Fprintf(stdout, "WARN password not tried: the stored session (from an earlier login, valid until %s) was used; the service checks credentials only by opening a session, so WATCHER_PLENTY_USERNAME/PASSWORD are first used when it ends and `watcher run` logs in (to try them now: %s)\n",
			after.ExpiresAt.UTC().Format(time.RFC3339), TryCredentials)
	}
	p, err := client.SearchOrders(ctx, order.Query{Filters: scope.Sent, Complex: scope.SentGroup, ItemsPerPage: 1})
	if err != nil {
		report(err, "", "order search")
		return
	}
	th := client.Throttle()
	report(nil, fmt.Sprintf("order search: %d orders match the filters sent; calls left: short %d/%d, long %d/%d",
		p.TotalsCount, th.Short.CallsLeft, th.Short.Limit, th.Long.CallsLeft, th.Long.Limit), "")
}

// checkRunning asks the watcher that holds the state file (WATCHER_HTTP_ADDR)
// instead of logging in: a second session beside the watcher's would count
// against the shop's session limit for the token's lifetime.
func checkRunning(ctx context.Context, cfg *Config, stdout io.Writer, report func(error, string, string)) {
	base := LocalURL(cfg.HTTPAddr)
	fmt.Fprintf(stdout, "ok   a watcher is running on %s: asking it at %s instead of logging in (no second session)\n", cfg.StatePath, base)
	code, body, err := GetLocal(ctx, base, "/readyz")
	switch {
	case err != nil:
		report(fmt.Errorf("%v: set WATCHER_HTTP_ADDR to the running watcher's address", err), "", "running watcher")
		return
	case code != http.StatusOK:
		report(fmt.Errorf("%d %s", code, bytes.TrimSpace(body)), "", "running watcher not ready")
	default:
		report(nil, "running watcher ready: "+string(bytes.TrimSpace(body)), "")
	}
	code, body, err = GetLocal(ctx, base, "/state")
	var rep Report
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET /state answered %d: %s", code, bytes.TrimSpace(body))
	}
	if err == nil {
		err = json.Unmarshal(body, &rep)
	}
	if err != nil {
		report(err, "", "running watcher's state")
		return
	}
	wm := "none yet"
	if !rep.Watermark.IsZero() {
		wm = rep.Watermark.Format(time.RFC3339)
	}
	report(nil, fmt.Sprintf("running watcher's state: watermark %s, %d orders tracked, outbox %d", wm, rep.OrdersTracked, rep.OutboxDepth), "")
}

// NATSConnectError is the failure line of check, rescan and reset for a
// first connect to NATS that failed: a server nobody can reach gets the
// fix with it (nats.go reports refused connections as ErrNoServers);
// anything else (refused credentials, TLS) is said as it is.
func NATSConnectError(url string, err error) (failText string, _ error) {
	url = publisher.RedactURL(url)
	var op *net.OpError
	switch {
	case err == nil:
		return "", nil
	case errors.Is(err, nats.ErrNoServers):
		err = errors.New("connection refused")
	case errors.As(err, &op), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
	default:
		return "NATS at " + url, err
	}
	return "cannot reach NATS at " + url, fmt.Errorf("%v: start NATS there, or set WATCHER_NATS_URL to where it listens", err)
}

// checkStore is where check's client keeps the session and its records:
// the state file, or memory without one.
type checkStore interface {
	plenty.TokenStore
	plenty.SessionRecords
}

// memoryStore keeps them in memory (WATCHER_STATE_PATH empty).
type memoryStore struct {
	plenty.MemoryTokenStore
	recs map[string][]byte
}

func (m *memoryStore) SaveRecord(name string, v any) error {
	b, err := json.Marshal(v)
	if err == nil {
		m.recs[name] = b
	}
	return err
}

func (m *memoryStore) LoadRecord(name string, v any) (bool, error) {
	b, ok := m.recs[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

// emptyOutbox lets check use the publisher's stream verification.
type emptyOutbox struct{}

func (emptyOutbox) Outbox(uint64, int) ([]state.OutboxEntry, error) { return nil, nil }
func (emptyOutbox) DeleteOutbox(...uint64) error                    { return nil }
func (emptyOutbox) OutboxDepth() int                                { return 0 }

// serverFeatures asks the NATS server for its version and what it offers.
func serverFeatures(ctx context.Context, nc *nats.Conn) (lease.ServerFeatures, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return lease.ServerFeatures{Version: nc.ConnectedServerVersion()}, err
	}
	return lease.Server(ctx, js)
}

// WriteLacks warns once for each thing the server lacks.
func WriteLacks(w io.Writer, f lease.ServerFeatures) {
	for _, l := range f.Lacks() {
		fmt.Fprintf(w, "WARN NATS server %s lacks %s\n", f.Version, l)
	}
}

// checkLease is `watcher check`'s line about the hot-standby group: who
// holds the lease of this shop and stream. Informational: no replica
// holding it is a warning (none running, or a takeover under way).
func checkLease(ctx context.Context, cfg *Config, nc *nats.Conn, w io.Writer) {
	key, err := replica.GroupKey(ctx, nc, cfg.LeaseBucket, cfg.GroupKey(), cfg.LegacyGroupKey(), cfg.Shop())
	v, found, exists := lease.Value{}, false, false
	if err == nil {
		v, found, exists, err = replica.Holder(ctx, nc, cfg.LeaseBucket, key)
	}
	fmt.Fprintf(w, "ok   shop %s (WATCHER_SHOP_ID, or derived from the service URL)\n", cfg.Shop())
	switch {
	case err != nil:
		fmt.Fprintf(w, "WARN lease: %v\n", err)
	case !exists:
		fmt.Fprintf(w, "ok   lease: no replica has run yet (bucket %s_lease is created at the first start)\n", cfg.LeaseBucket)
	case !found:
		fmt.Fprintf(w, "WARN lease %s: no replica holds it (none running, or a takeover under way)\n", key)
	default:
		fmt.Fprintf(w, "ok   lease %s: held by %s (host %s) since %s\n", key, v.Instance, v.Host, v.Since.Format(time.RFC3339))
	}
}
