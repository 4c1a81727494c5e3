package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/kvwatch"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/replica"
)

// HostConfig configures a Host.
type HostConfig struct {
	// Config is the process's configuration: its NATS connection settings
	// (used unless Conn is given) and the HTTP address (Listen).
	Config *Config
	// Name names the NATS connection ["orderwatch"].
	Name string
	// Conn, when set, is a connection the caller owns (not closed by
	// Close); nil: the host connects as Config says.
	Conn *nats.Conn
	// Listen is the HTTP address the host listens on ("": none; the
	// process serves nothing).
	Listen string
	// Takeovers bounds the pipelines restoring a shop's state at once
	// (replica.Config.Takeovers) [16].
	Takeovers int
	// StreamOwner names the owner of a stream the host's shops share (the
	// stream's metadata publisher.MetaShop); "": each shop's stream is its
	// own.
	StreamOwner string
	// Buckets, when set, are the hot standby's buckets bound by the caller
	// (a test wraps them to inject faults): BindBuckets returns them.
	Buckets *replica.Buckets
	Logger  *slog.Logger
}

// Host is what the pipelines of one process share, whether it runs one
// shop or a fleet of them: the NATS connection, the hot standby's buckets
// (bound once, BindBuckets), the bound on takeovers at once and the HTTP
// listener; the leases' renewals go over a connection of their own
// (LeaseConn). Every pipeline runs on one (Options.Host; New builds one of
// its own, the same way, when none is given): one shop is a fleet of one.
type Host struct {
	cfg       HostConfig
	log       *slog.Logger
	nc        *nats.Conn
	leases    *nats.Conn // the leases' and announcements' own connection (nc when the caller's)
	natsErr   lastErr    // why the last attempt to (re)connect to NATS failed
	ln        net.Listener
	takeovers chan struct{}

	mu        sync.Mutex
	buckets   *replica.Buckets    // nil until BindBuckets
	limits    *replica.LimitsFeed // the groups' limits keys' one watch (with buckets)
	srv       *http.Server        // what the listener serves, once Serve was called
	closed    bool
	stopWatch context.CancelFunc              // the lease bucket's and the limits' watches (BindBuckets)
	followers []func(jetstream.KeyValueEntry) // FollowLeases
	wakers    map[string]map[*func()]struct{} // by lease key: the pipelines' WakeLease
}

// NewHost connects to NATS (unless HostConfig.Conn) and listens on the
// HTTP address (HostConfig.Listen). A configuration mistake is a
// *ConfigError.
func NewHost(hc HostConfig) (_ *Host, err error) {
	if hc.Logger == nil {
		hc.Logger = slog.New(slog.DiscardHandler)
	}
	if hc.Name == "" {
		hc.Name = "orderwatch"
	}
	if hc.Takeovers <= 0 {
		hc.Takeovers = 16
	}
	h := &Host{cfg: hc, log: hc.Logger, nc: hc.Conn, takeovers: make(chan struct{}, hc.Takeovers)}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	if h.nc == nil {
		if hc.Config == nil {
			return nil, errors.New("pipeline: NewHost needs a Config or a Conn")
		}
		nc := hc.Config.NATS(hc.Name)
		nc.Logger, nc.OnConnectError = h.log, h.natsErr.set
		if h.nc, err = publisher.Connect(nc); err != nil {
			return nil, ConfigErrorf("NATS at %s: %v", publisher.RedactURL(hc.Config.NATSURL), err)
		}
	}
	if hc.Listen != "" {
		if h.ln, err = net.Listen("tcp", hc.Listen); err != nil {
			// The address is configuration (a port taken by another program
			// is fixed there too): exit 2, like every configuration error.
			return nil, ConfigErrorf("listen on %s (%s_HTTP_ADDR): %v", hc.Listen, EnvPrefix, err)
		}
	}
	if hc.Buckets != nil {
		h.adopt(hc.Buckets)
	}
	return h, nil
}

// Conn is the process's NATS connection.
func (h *Host) Conn() *nats.Conn { return h.nc }

// yieldMax bounds how long a pipeline's next sweep gives way to the
// process's takeovers (yield); yieldFrom is how many restores at once
// make it give way.
const (
	yieldMax  = 3 * time.Second
	yieldFrom = 8
)

// yield holds a pipeline's next sweep (poller.Config.Yield) while the
// process restores many shops it just took over (yieldFrom or more at
// once), yieldMax at most: after a fleet's member died, hundreds of them,
// and on a loaded machine the steady sweeps of the shops the process runs
// took most of the CPU their restores needed (docs/fleet.md, "Takeover
// under load"). A shop's first sweep after its takeover is not held; a
// steady shop's next one comes up to yieldMax later. Fewer restores (a
// shop moved by a rebalancing, a few whose takeovers keep failing) hold
// nothing: each shop is a bulkhead (8 or more failing again and again add
// up to yieldMax to every sweep while they fail).
func (h *Host) yield(ctx context.Context) {
	if len(h.takeovers) < yieldFrom {
		return
	}
	end := time.NewTimer(yieldMax)
	defer end.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for len(h.takeovers) >= yieldFrom {
		select {
		case <-ctx.Done():
			return
		case <-end.C:
			return
		case <-tick.C:
		}
	}
}

// LeaseConn is the connection of the leases of the buckets bound by
// BindBuckets (their renewals, the watch of the lease bucket) and of a
// fleet's announcements: one of their own, opened by BindBuckets, unless
// the caller gave the host its connection (HostConfig.Conn); Conn before.
func (h *Host) LeaseConn() *nats.Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leases == nil {
		return h.nc
	}
	return h.leases
}

// leaseJS is the JetStream context of LeaseConn, connecting it first.
// The leases' renewals go over a connection of their own: a restore's
// stream reads and snapshot downloads never queue a renewal behind them
// (in this process's socket or in the server's for it).
func (h *Host) leaseJS() (jetstream.JetStream, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.leases == nil {
		h.leases = h.nc
		if h.cfg.Conn == nil && h.cfg.Config != nil {
			lc := h.cfg.Config.NATS(h.cfg.Name + " (leases)")
			lc.Logger = h.log
			nc, err := publisher.Connect(lc)
			if err != nil {
				return nil, err
			}
			h.leases = nc
		}
	}
	return jetstream.New(h.leases, jetstream.WithDefaultTimeout(5*time.Second))
}

// NATSCause is why the last attempt to (re)connect to NATS failed ("":
// none known).
func (h *Host) NATSCause() string { return h.natsErr.get() }

// Addr is the HTTP address listened on ("" when none).
func (h *Host) Addr() string {
	if h.ln == nil {
		return ""
	}
	return h.ln.Addr().String()
}

// Serve serves handler on the host's listener, the first handler given
// only: a fleet serves its own (every shop under /shops/{id}/), a single
// shop's pipeline its own. It reports whether handler is served.
func (h *Host) Serve(handler http.Handler) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ln == nil || h.srv != nil || h.closed {
		return false
	}
	h.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	srv, ln := h.srv, h.ln
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("HTTP server stopped", "err", err)
		}
	}()
	return true
}

// BindBuckets creates (or binds) the hot standby's buckets <name>_lease,
// _checkpoint and _snapshot once for all the host's pipelines, after the
// stream (whose replicas they follow unless replicas > 0): a pipeline
// built afterwards binds none itself and makes no request to NATS when
// it is built (the replica checks the stream and refuses another shop's
// group before any call, replica.ShopConflictError), and its lease's key
// is not watched by a consumer of its own (the process watches the
// bucket once for all of them, watchLeases), nor its group's limits key
// (the process's one watch of them, LimitsFeed). The first binding stays.
func (h *Host) BindBuckets(ctx context.Context, js jetstream.JetStream, stream, name string, ttl time.Duration, replicas int) (*replica.Buckets, error) {
	if b := h.Buckets(); b != nil {
		return b, nil
	}
	if replicas <= 0 {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", stream, err)
		}
		replicas = max(s.CachedInfo().Config.Replicas, 1)
	}
	b, err := replica.BindBuckets(ctx, js, name, ttl, replicas, h.log)
	if err != nil {
		return nil, err
	}
	if ljs, err := h.leaseJS(); err != nil {
		return nil, err
	} else if ljs.Conn() != h.nc {
		b.Lease, b.TTL, err = lease.Bucket(ctx, ljs, name+"_lease", b.TTL, lease.Replicas(replicas), lease.BucketLogger(h.log))
		if err != nil {
			return nil, err
		}
	}
	return h.adopt(b), nil
}

// adopt makes b the host's buckets, unless it has some, and watches their
// lease bucket and the groups' limits keys of their checkpoint bucket.
func (h *Host) adopt(b *replica.Buckets) *replica.Buckets {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buckets == nil && !h.closed {
		h.buckets = b
		wctx, stop := context.WithCancel(context.Background())
		h.stopWatch = stop
		go h.watchLeases(wctx, b.Lease)
		h.limits = replica.NewLimitsFeed(b.Checkpoints, time.Second)
		go h.limits.Run(wctx)
	}
	return h.buckets
}

// FollowLeases has f told of every entry of the lease bucket the host's
// one watch delivers (the current values first, then each change; nil
// before the current values when the watch starts again: forget what was
// told). Called before BindBuckets (a fleet follows the holders).
func (h *Host) FollowLeases(f func(jetstream.KeyValueEntry)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.followers = append(h.followers, f)
}

// wakeOnLeaseGone calls wake when one of keys is seen deleted or expired in
// the lease bucket (the host's watch); unregister ends it.
func (h *Host) wakeOnLeaseGone(keys []string, wake func()) (unregister func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wakers == nil {
		h.wakers = map[string]map[*func()]struct{}{}
	}
	id := &wake
	for _, k := range keys {
		if h.wakers[k] == nil {
			h.wakers[k] = map[*func()]struct{}{}
		}
		h.wakers[k][id] = struct{}{}
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, k := range keys {
			delete(h.wakers[k], id)
			if len(h.wakers[k]) == 0 {
				delete(h.wakers, k)
			}
		}
	}
}

// watchLeases is the host's one watch of the lease bucket until ctx ends:
// a pipeline's lease watches no key of its own (lease.Config.NoWatch, a
// consumer per shop before); when its key is deleted or expires (the
// server's marker) the lease tries at once.
func (h *Host) watchLeases(ctx context.Context, kv jetstream.KeyValue) { WatchKV(ctx, kv, h.tell) }

// WatchKV hands f every entry of kv until ctx ends: the current values,
// then each change; nil before the current values whenever the watch
// starts (again, a second after it ended: forget what was handed).
func WatchKV(ctx context.Context, kv jetstream.KeyValue, f func(jetstream.KeyValueEntry)) {
	kvwatch.Run(ctx, kv, kvwatch.Options{Retry: time.Second, Reopen: time.Second}, f)
}

// tell hands an entry of the lease bucket to the followers and wakes the
// leases waiting for its key when it is gone.
func (h *Host) tell(e jetstream.KeyValueEntry) {
	h.mu.Lock()
	fs := h.followers
	var wake []func()
	if e != nil && e.Operation() != jetstream.KeyValuePut {
		for f := range h.wakers[e.Key()] {
			wake = append(wake, *f)
		}
	}
	h.mu.Unlock()
	for _, f := range fs {
		f(e)
	}
	for _, f := range wake {
		f()
	}
}

// LimitsFeed is the process's one watch of the groups' limits keys in
// the checkpoint bucket of Buckets, for all its pipelines' replicas
// (replica.Config.LimitsFeed); nil before BindBuckets.
func (h *Host) LimitsFeed() *replica.LimitsFeed {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.limits
}

// Buckets are the buckets bound by BindBuckets (nil before).
func (h *Host) Buckets() *replica.Buckets {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.buckets
}

// Close stops serving (within a second), closes the listener and the NATS
// connection (unless the caller's, HostConfig.Conn). It may be called more
// than once.
func (h *Host) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	srv, leases := h.srv, h.leases
	if h.stopWatch != nil {
		h.stopWatch()
	}
	h.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = srv.Shutdown(ctx)
		cancel()
	}
	if h.ln != nil {
		h.ln.Close()
	}
	if h.nc != nil && h.nc != h.cfg.Conn {
		h.nc.Close()
	}
	if leases != nil && leases != h.nc {
		leases.Close()
	}
}
