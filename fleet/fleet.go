// Package fleet runs many shops in one deployment: every replica (member)
// of the fleet runs the pipelines (package pipeline) of the shops whose
// lease it holds, one lease key per shop in the hot standby's lease bucket
// (package lease, through the pipeline's replica), so that fencing per
// shop is what it is for one shop: a shop is never called or published
// for by two members at once.
//
// Members announce themselves in a members bucket (a key each, with a
// TTL, renewed every third of it); each computes the fair share
// ceil(shops/members) from the live ones and decides alone (Decide, a
// pure function): a member below its share starts the pipelines of free
// shops (the pipeline's replica acquires the lease, restores the shop's
// state from the group's checkpoint and snapshot dump when its state file
// is not the newest, and calls the shop), a member above its share gives
// one shop up at a time (the pipeline stops, flushes, writes its last
// checkpoint and releases the lease; another member takes it over at
// once). A member that dies leaves its leases to expire (the lease TTL)
// and its announcement too; the others then take its shops.
//
// The registry of shops (package shops) is applied live with Apply.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/shops"
)

// Config configures a member of a fleet.
type Config struct {
	// Shared is what the member's pipelines share (pipeline.NewHost: the
	// NATS connection, the buckets, the HTTP listener); nil: one on NC.
	Shared *pipeline.Host
	// NC is the member's NATS connection, shared by its pipelines (not
	// closed by the fleet), when Shared is nil.
	NC *nats.Conn
	// Instance names this member (the pod name) in the members bucket and
	// in the leases; Host is informational.
	Instance, Host string
	// Base is the configuration every shop's pipeline starts from (the
	// WATCHER_* variables); a shop's entry overrides the service URL and
	// credentials, the scope, the call share, the subject prefix and the
	// stream. Its LeaseBucket names the buckets: <LeaseBucket>_lease
	// (one key per shop), _checkpoint, _snapshot and _fleet (members).
	Base pipeline.Config
	// StateDir holds one state file per shop: <StateDir>/<shop id>.db.
	StateDir string

	MemberTTL   time.Duration // an announcement's life [6s]; renewed every third
	Tick        time.Duration // a decision at least this often [1s]
	Slack       int           // shops above the fair share kept before one is given up [0]
	OrphanGrace time.Duration // see View.OrphanGrace [10s]
	// Getenv resolves the shops' passwordEnv references [os.Getenv].
	Getenv func(string) string
	// Now is the member's wall clock [time.Now]: informational only (the
	// times in its announcements and its leases); nothing is judged by a
	// writer's clock.
	Now func() time.Time

	Logger     *slog.Logger
	Registerer prometheus.Registerer // the fleet's metrics and, with a shop label, each pipeline's
	Gatherer   prometheus.Gatherer
	Version    string
	Replica    replica.Tuning // the pipelines' hot-standby delays (tests)
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.MemberTTL, 6*time.Second)
	def(&c.Tick, time.Second)
	def(&c.OrphanGrace, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Registerer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Host == "" {
		c.Host, _ = os.Hostname()
	}
}

// Fleet is one member of a fleet.
type Fleet struct {
	cfg   Config
	log   *slog.Logger
	host  *pipeline.Host
	own   bool // host built by New: closed at the end of Run
	nonce string
	since time.Time
	wake  chan struct{}
	m     *metrics

	mu       sync.Mutex
	registry map[string]shops.Shop // in force
	invalid  []error               // the registry's invalid entries
	fileErr  error
	runs     map[string]*run      // pipelines of this member, by shop
	stopping map[*run]struct{}    // pipelines being stopped
	members  map[string]Member    // by key
	left     map[string]time.Time // member key -> when its announcement went (memberGone)
	holders  map[string]holder    // by lease key
	keys     map[string][2]string // shop -> its lease keys (groupKeysLocked; nil: to be made)
	freeAt   map[string]time.Time // shop -> first seen free
	cooldown map[string]time.Time // shop -> given up at
	bound    bool                 // the buckets are bound
	buckets  *replica.Buckets     // the shops' hot-standby buckets, once bound
	builds   chan struct{}        // pipelines being built (a slot each)
	lastPlan Plan
	lastView View
	firstRev uint64 // the revision of this member's first announcement
	clash    *clash // another process announcing under this member's name

	wg sync.WaitGroup
}

// run is one shop's pipeline in this member.
type run struct {
	shop    shops.Shop
	keys    [2]string         // the group's lease keys: Config.GroupKey, LegacyGroupKey
	w       *pipeline.Watcher // nil while it is built (guarded by Fleet.mu)
	cancel  context.CancelFunc
	done    chan struct{}
	started time.Time
	reason  string // why it stops ("" while it runs)
}

// New returns a member; Run makes it work. Apply feeds it the registry.
func New(cfg Config) (*Fleet, error) {
	cfg.defaults()
	if (cfg.NC == nil && cfg.Shared == nil) || cfg.Instance == "" || cfg.StateDir == "" {
		return nil, errors.New("fleet: Shared (or NC), Instance and StateDir are required")
	}
	if cfg.Base.Stream == "" {
		return nil, pipeline.ConfigErrorf("fleet mode needs JetStream (%s_STREAM): the leases, checkpoints and snapshots live there", pipeline.EnvPrefix)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("fleet: state directory: %w", err)
	}
	host := cfg.Shared
	if host == nil {
		var err error
		host, err = pipeline.NewHost(NewHostConfig(cfg.Base, cfg.NC, "", cfg.Logger))
		if err != nil {
			return nil, err
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	f := &Fleet{
		cfg: cfg, log: cfg.Logger.With("component", "fleet"), host: host, own: cfg.Shared == nil, nonce: hex.EncodeToString(b[:]), since: cfg.Now(),
		wake: make(chan struct{}, 1), registry: map[string]shops.Shop{}, runs: map[string]*run{},
		stopping: map[*run]struct{}{}, members: map[string]Member{}, left: map[string]time.Time{}, holders: map[string]holder{},
		freeAt: map[string]time.Time{}, cooldown: map[string]time.Time{}, builds: make(chan struct{}, buildsAtOnce),
	}
	f.m = newMetrics(cfg.Registerer, f)
	// The holders as the host's one watch of the lease bucket delivers
	// them (it wakes the pipelines' leases too).
	host.FollowLeases(follower(&f.mu, &f.holders, decodeHolder, sameHolder, f.leaseChanged))
	return f, nil
}

// Check is the registry's validation of an entry (shops.Options.Check):
// the pipeline's configuration built from it must be valid.
func (f *Fleet) Check(s shops.Shop) error {
	cfg, err := f.shopConfig(s)
	if err != nil {
		return err
	}
	return cfg.Validate()
}

// RegistryOptions are the registry's rules in this fleet (for
// shops.NewWatcher): every entry checked by the pipeline configuration
// built from it (Check), and no two entries whose subjects overlap, the
// fleet's stream capturing <WATCHER_SUBJECT_PREFIX>.>.
func (f *Fleet) RegistryOptions(log *slog.Logger) shops.Options {
	b := f.cfg.Base
	return shops.Options{
		Check: f.Check, Getenv: f.cfg.Getenv, Logger: log,
		Subjects: func(s shops.Shop) shops.Subjects {
			c := b
			shopNames(&c, s)
			return shops.Subjects{Stream: c.Stream, Prefix: c.SubjectPrefix, Default: c.SubjectPrefix == b.SubjectPrefix+"."+s.ID}
		},
		Streams: map[string]string{b.Stream: b.SubjectPrefix},
	}
}

// shopConfig is the pipeline configuration of a shop: the base with the
// entry's fields, its own state file, the lease on with this member's
// instance. A shop without its own subject prefix publishes under
// <base prefix>.<id>: shops sharing a stream never share subjects.
func (f *Fleet) shopConfig(s shops.Shop) (*pipeline.Config, error) {
	c := f.cfg.Base
	shopNames(&c, s)
	c.PlentyURL, c.PlentyUsername = s.URL, s.Username
	pw, err := s.Password(f.cfg.Getenv)
	if err != nil {
		return nil, err
	}
	c.PlentyPassword, c.PlentyPasswordFile = pw, ""
	c.Scope, c.ScopeJSON = s.Scope, s.ScopeJSON
	if s.CallShare > 0 {
		c.CallShare = s.CallShare
	}
	c.Source = ""
	c.StatePath = filepath.Join(f.cfg.StateDir, s.ID+".db")
	c.Lease, c.InstanceID = true, f.cfg.Instance
	c.HTTPAddr = "127.0.0.1:0" // not listened on: the member's host serves them all
	return &c, nil
}

// shopNames sets in c, the fleet's base configuration, the names of a
// shop: its id, its subject prefix (its entry's, or <base prefix>.<id>)
// and stream (its entry's, or the base's).
func shopNames(c *pipeline.Config, s shops.Shop) {
	c.ShopID = s.ID
	c.SubjectPrefix += "." + s.ID
	if s.SubjectPrefix != "" {
		c.SubjectPrefix = s.SubjectPrefix
	}
	if s.Stream != "" {
		c.Stream = s.Stream
	}
}

// Apply takes a reading of the registry: removed shops stop (their lease
// released), changed ones are stopped and taken again with the new entry
// (by whichever member gets them), added ones are contended for at the
// next decision.
func (f *Fleet) Apply(up shops.Update) {
	f.mu.Lock()
	f.invalid, f.fileErr = up.Invalid, up.FileErr
	if up.FileErr == nil {
		next := make(map[string]shops.Shop, len(up.Shops))
		for _, s := range up.Shops {
			next[s.ID] = s
		}
		f.registry, f.keys = next, nil
		for _, c := range up.Changes {
			if r := f.runs[c.Shop.ID]; r != nil && c.Kind != shops.Added {
				f.stopLocked(r, "registry: shop "+string(c.Kind))
			}
		}
	}
	f.mu.Unlock()
	f.poke()
}

func (f *Fleet) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run works until ctx ends: it binds the buckets, announces this member,
// follows the members and the leases, and decides every Tick (and at
// every change) which shops to run. Then it stops every pipeline (each
// flushes, writes its last checkpoint and releases its lease) and
// withdraws its announcement.
func (f *Fleet) Run(ctx context.Context) error {
	if f.own {
		defer f.host.Close()
	}
	js, err := jetstream.New(f.host.Conn(), jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		return err
	}
	var members jetstream.KeyValue
	var buckets *replica.Buckets
	var mjs jetstream.JetStream // the members bucket's: on the leases' connection
	for {
		buckets, members, mjs, err = f.bind(ctx, js)
		if err == nil {
			break
		}
		f.log.Warn("fleet: the buckets cannot be used yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	f.mu.Lock()
	f.bound, f.buckets = true, buckets
	f.mu.Unlock()
	wctx, stopWatch := context.WithCancel(ctx)
	hctx, stopHeartbeat := context.WithCancel(ctx)
	beating := make(chan struct{})
	go func() { defer close(beating); f.heartbeat(hctx, mjs, members) }()
	var watchers sync.WaitGroup
	watchers.Go(func() { followKV(wctx, members, &f.mu, &f.members, decodeMember, sameMember, f.membersChanged) })
	// One announcement round before the first decision: members started
	// together see each other and do not all take everything.
	select {
	case <-ctx.Done():
	case <-time.After(min(f.cfg.MemberTTL/3, 2*time.Second)):
	}
	tick := time.NewTicker(f.cfg.Tick)
	defer tick.Stop()
	var refused error
	for ctx.Err() == nil && refused == nil {
		if refused = f.refused(); refused != nil {
			break
		}
		f.decide(ctx)
		select {
		case <-ctx.Done():
		case <-f.wake:
		case <-tick.C:
		}
	}
	// The announcement is withdrawn first: the others count one member
	// less and take the shops as soon as they are released. (Not when
	// another process announces under this name: the key is its too.)
	stopHeartbeat()
	<-beating
	if refused == nil {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = members.Delete(dctx, memberKey(f.cfg.Instance))
		cancel()
	}
	f.shutdown()
	stopWatch()
	watchers.Wait()
	return refused
}

// bind creates (or binds) the shared stream, the buckets of the shops'
// hot standby (lease, checkpoint, snapshot: bound once on the member's
// host for every pipeline) and the members bucket, which like the leases
// is used over the host's lease connection (its JetStream context is
// returned: the heartbeat's).
func (f *Fleet) bind(ctx context.Context, js jetstream.JetStream) (*replica.Buckets, jetstream.KeyValue, jetstream.JetStream, error) {
	b := f.cfg.Base
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The stream first: the buckets' replicas follow its own, as every
	// shop's replica binds them (replica.bind), unless set.
	if err := ensureStream(bctx, js, b); err != nil {
		return nil, nil, nil, err
	}
	buckets, err := f.host.BindBuckets(bctx, js, b.Stream, b.LeaseBucket, b.LeaseTTL, b.LeaseReplicas)
	if err != nil {
		return nil, nil, nil, err
	}
	mjs, err := jetstream.New(f.host.LeaseConn(), jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		return nil, nil, nil, err
	}
	members, err := membersBucket(bctx, mjs, b.LeaseBucket+"_fleet", f.cfg.MemberTTL, buckets.Replicas)
	if err != nil {
		return nil, nil, nil, err
	}
	return buckets, members, mjs, nil
}

// NewHostConfig is the host of a fleet member: on nc (nil: connecting as
// base says), listening on listen ("": none), its shops' stream owned by
// the fleet, takeoversAtOnce restores at once.
func NewHostConfig(base pipeline.Config, nc *nats.Conn, listen string, log *slog.Logger) pipeline.HostConfig {
	host, _ := os.Hostname()
	instance := base.InstanceID
	if instance == "" {
		instance = host
	}
	return pipeline.HostConfig{
		Config: &base, Name: "orderwatch-fleet " + instance, Conn: nc, Listen: listen,
		Takeovers: takeoversAtOnce, StreamOwner: streamOwner(base), Logger: log,
	}
}

// streamOwner names the fleet as the owner of its shared stream (the
// stream's metadata publisher.MetaShop): a single-shop watcher is refused
// on it, the fleet's shops are not.
func streamOwner(b pipeline.Config) string { return "fleet " + b.LeaseBucket }

// ensureStream creates the shared stream when missing, capturing every
// shop's default subjects (<prefix>.<id>.>): a shop's pipeline would
// otherwise create it with its own subjects only.
func ensureStream(ctx context.Context, js jetstream.JetStream, b pipeline.Config) error {
	_, err := js.Stream(ctx, b.Stream)
	if err == nil || !errors.Is(err, jetstream.ErrStreamNotFound) || !b.StreamCreate {
		return err
	}
	maxBytes := b.StreamMaxBytes
	if maxBytes == 0 {
		maxBytes = -1
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: b.Stream, Description: "orderwatch order change events (CloudEvents; Nats-Msg-Id = <shop>:<event id>)",
		Metadata: map[string]string{publisher.MetaShop: streamOwner(b)},
		Subjects: []string{b.SubjectPrefix + ".>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		Discard: jetstream.DiscardOld, Duplicates: b.DuplicateWindow, MaxAge: b.StreamMaxAge, MaxBytes: maxBytes, Replicas: b.StreamReplicas,
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create stream %s: %w", b.Stream, err)
	}
	return nil
}

// heartbeat announces this member every third of the members' TTL. A
// members bucket found gone (deleted) is created again: the handle and
// the watches on it work on the new one.
func (f *Fleet) heartbeat(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue) {
	key := memberKey(f.cfg.Instance)
	t := time.NewTicker(f.cfg.MemberTTL / 3)
	defer t.Stop()
	for {
		f.mu.Lock()
		m := Member{
			Instance: f.cfg.Instance, Host: f.cfg.Host, Nonce: f.nonce, Shops: len(f.runs), Starting: f.startingLocked(time.Now()),
			Can: slices.Sorted(maps.Keys(f.registry)), Share: f.lastPlan.Share, Since: f.since.UTC(), At: f.cfg.Now().UTC(), First: f.firstRev,
		}
		f.mu.Unlock()
		if m.Can == nil {
			m.Can = []string{} // none: not an earlier version's silence
		}
		b, _ := json.Marshal(m)
		pctx, cancel := context.WithTimeout(ctx, f.cfg.MemberTTL/3)
		rev, err := kv.Put(pctx, key, b)
		if err != nil && ctx.Err() == nil {
			f.log.Warn("fleet: announcing this member failed", "err", err)
			if _, gone := js.KeyValue(pctx, kv.Bucket()); errors.Is(gone, jetstream.ErrBucketNotFound) {
				_, err := membersBucket(pctx, js, kv.Bucket(), f.cfg.MemberTTL, f.membersReplicas())
				f.log.Warn("fleet: the members bucket was gone; created again", "bucket", kv.Bucket(), "err", err)
				f.mu.Lock()
				f.firstRev = 0 // revisions start again at 1 (noteClashLocked)
				f.mu.Unlock()
			}
		}
		cancel()
		if err == nil {
			f.mu.Lock()
			if f.firstRev == 0 {
				f.firstRev = rev
			}
			f.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// membersReplicas are the members bucket's replicas: the lease bucket's.
func (f *Fleet) membersReplicas() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.buckets != nil {
		return max(f.buckets.Replicas, 1)
	}
	return 1
}

// startingLocked are the shops this member started less than the orphan
// grace ago whose lease it does not hold yet (Member.Starting).
func (f *Fleet) startingLocked(now time.Time) []string {
	var out []string
	for id, r := range f.runs {
		if r.reason != "" || now.Sub(r.started) >= f.cfg.OrphanGrace {
			continue
		}
		if h, ok := f.holders[r.keys[0]]; ok && h.Instance == f.cfg.Instance {
			continue
		}
		if h, ok := f.holders[r.keys[1]]; ok && r.keys[1] != "" && h.Instance == f.cfg.Instance {
			continue
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// view is what Decide needs, read now.
func (f *Fleet) viewLocked(now time.Time) View {
	v := View{
		Self: f.cfg.Instance, Members: map[string]int{}, Holder: map[string]string{}, FreeFor: map[string]time.Duration{},
		Running: map[string]bool{}, Stopping: len(f.stopping), Cooldown: map[string]bool{}, Starting: map[string]string{},
		Can: map[string]map[string]bool{}, Shares: map[string]int{}, Slack: f.cfg.Slack, OrphanGrace: f.cfg.OrphanGrace,
	}
	for _, m := range f.liveMembersLocked(now) {
		v.Members[m.Instance] = m.Shops
		if m.can != nil {
			v.Can[m.Instance] = m.can
		}
		if m.Share > 0 {
			v.Shares[m.Instance] = m.Share
		}
		for _, id := range m.Starting {
			v.Starting[id] = m.Instance
		}
	}
	v.Members[f.cfg.Instance] = len(f.runs)
	keys := f.groupKeysLocked()
	for id := range f.registry {
		v.Shops = append(v.Shops, id)
		if h := f.holderLocked(keys[id], now); h != "" {
			v.Holder[id] = h
			delete(f.freeAt, id)
			if h != f.cfg.Instance {
				delete(f.cooldown, id) // another member had its chance
			}
		} else {
			at, seen := f.freeAt[id]
			if !seen {
				at = now
				f.freeAt[id] = now
			}
			v.FreeFor[id] = now.Sub(at)
		}
		if at, ok := f.cooldown[id]; ok {
			if now.Sub(at) < 2*f.cfg.OrphanGrace {
				v.Cooldown[id] = true
			} else {
				delete(f.cooldown, id)
			}
		}
	}
	slices.Sort(v.Shops)
	for id, r := range f.runs {
		if r.reason == "" {
			v.Running[id] = true
		}
	}
	return v
}

// liveMembersLocked are the other members whose announcement arrived
// within twice the members' TTL (by this member's clock: a writer's clock
// does not matter; on a server with expiry markers an expired one is gone
// already).
func (f *Fleet) liveMembersLocked(now time.Time) []Member {
	var out []Member
	for _, m := range f.members {
		if m.Instance == f.cfg.Instance || now.Sub(m.seen) > 2*f.cfg.MemberTTL {
			continue
		}
		out = append(out, m)
	}
	return out
}

// holderLocked is the member holding a shop's lease under one of its
// keys, "" when none: a lease counts while its last renewal arrived
// within the lease TTL (and 2 s) by this member's clock; on a server with
// expiry markers an expired lease is gone already.
func (f *Fleet) holderLocked(keys [2]string, now time.Time) string {
	ttl := f.cfg.Base.LeaseTTL
	if f.buckets != nil && f.buckets.TTL > 0 {
		ttl = f.buckets.TTL
	}
	if ttl <= 0 {
		ttl = lease.DefaultTTL
	}
	for _, k := range keys {
		if h, ok := f.holders[k]; ok && k != "" {
			if at, gone := f.left[memberKey(h.Instance)]; gone && h.Instance != f.cfg.Instance && now.Sub(at) < ttl+2*time.Second && now.Sub(h.seen) > ttl/3 {
				// Its member is gone and the lease has not been renewed
				// for a renewal interval (a member whose announcement is
				// only late still renews): contended for while it runs out.
				return ""
			}
			if now.Sub(h.seen) < ttl+2*time.Second {
				return h.Instance
			}
			return ""
		}
	}
	return ""
}

// memberGone notes that a member's announcement is gone (deleted when it
// stopped, or expired: the server's marker, 4-6 s after it died, while its
// leases run 6-9 s): the shops it holds whose leases have not been renewed
// for a renewal interval count as free (holderLocked), and
// the others build their pipelines while its leases run out, which then
// take them at the lease's expiry (woken by the host's watch) instead of
// only starting then. Called with f.mu held.
func (f *Fleet) memberGone(key string, now time.Time) {
	for k, at := range f.left {
		if now.Sub(at) > time.Minute {
			delete(f.left, k)
		}
	}
	f.left[key] = now
}

// memberBack: a member announces (again). Called with f.mu held.
func (f *Fleet) memberBack(key string) { delete(f.left, key) }

// groupKeysLocked are the lease keys of every shop of the registry: its
// group key (Config.GroupKey, by its registry id) and the key an earlier
// version used (LegacyGroupKey, by its URL), the latter only when it is
// not another entry's own key: two entries on one URL, one keeping the id
// a single-shop release derived from it, are two shops.
func (f *Fleet) groupKeysLocked() map[string][2]string {
	if f.keys != nil {
		return f.keys
	}
	keys := make(map[string][2]string, len(f.registry))
	own := make(map[string]bool, len(f.registry))
	for id, s := range f.registry {
		kc := f.baseKeyConfig(s)
		keys[id] = [2]string{kc.GroupKey(), kc.LegacyGroupKey()}
		own[keys[id][0]] = true
	}
	for id, k := range keys {
		if k[1] == k[0] || own[k[1]] {
			keys[id] = [2]string{k[0], ""}
		}
	}
	f.keys = keys
	return keys
}

// baseKeyConfig is the part of a shop's configuration its lease key
// depends on (no secret needed).
func (f *Fleet) baseKeyConfig(s shops.Shop) *pipeline.Config {
	c := f.cfg.Base
	c.ShopID, c.PlentyURL = s.ID, s.URL
	if s.Stream != "" {
		c.Stream = s.Stream
	}
	return &c
}

// decide runs one round: Decide, then start and stop what it says.
func (f *Fleet) decide(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, r := range f.runs {
		if _, ok := f.registry[id]; !ok {
			f.stopLocked(r, "registry: shop removed")
		}
	}
	v := f.viewLocked(time.Now())
	p := Decide(v)
	f.lastPlan, f.lastView = p, v
	for _, id := range p.Stop {
		if r := f.runs[id]; r != nil {
			why := "rebalancing: above the fair share"
			if h := v.Holder[id]; h != "" && h != v.Self {
				why = "the lease is held by " + h
			}
			f.stopLocked(r, why)
			f.cooldown[id] = time.Now()
		}
	}
	for _, id := range p.Start {
		f.startLocked(ctx, f.registry[id])
	}
}

// buildsAtOnce bounds the pipelines built at once (each opens its state
// file and reads it). They are built outside the fleet's lock: a takeover
// of hundreds of shops does not wait for them one by one. 24 (8 before):
// a killed member's shops are built while its leases run out, and a
// pipeline built in time has its standby's state warm when the lease
// comes (docs/fleet.md, "Takeover under load": 8 left the last of 167
// built 1.2-1.7 s after the first).
const buildsAtOnce = 24

// takeoversAtOnce bounds the pipelines restoring a shop's state at once
// (replica.Config.Takeovers): after a member died, its hundreds of shops
// are taken over a few dozen at a time instead of all asking NATS for
// their checkpoint, dump and stream at the same moment. Unbounded (333 at
// once), every request slowed down, the leases' renewals too (then on the
// same connection), and members lost and retook their leases in a
// cascade; 16 at once, the restores queued (1,000 shops, load ~20: first
// call p50 25 s, p99 35 s); 48 at once with the renewals on their own
// connection: p50 11.5 s, p99 15.1 s, no renewal failed (docs/fleet.md).
// Since a restore is a few requests (mirror/prefetch.go), 128 at once: the
// queue for 48 was up to 2.5 s of a loaded takeover's p99 (docs/fleet.md,
// "Takeover under load"); renewals stayed under 4.6 s apart.
const takeoversAtOnce = 128

// startLocked starts a shop's pipeline: built in the background (a run
// without its pipeline yet is starting), its replica then contends for
// the lease and, holding it, restores the group's state and calls the
// shop.
func (f *Fleet) startLocked(ctx context.Context, s shops.Shop) {
	if f.runs[s.ID] != nil {
		return
	}
	// Stopped by stopLocked only: at the end of Run after the announcement
	// is withdrawn (the others then take the shops at once).
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &run{shop: s, keys: f.groupKeysLocked()[s.ID], cancel: cancel, done: make(chan struct{}), started: time.Now()}
	f.runs[s.ID] = r
	f.m.starts.Inc()
	f.wg.Go(func() {
		defer close(r.done)
		w, err := f.build(rctx, s)
		f.mu.Lock()
		if err != nil {
			if rctx.Err() == nil {
				f.log.Error("fleet: the shop's pipeline cannot start", "shop", s.ID, "err", err)
				f.m.startErrors.Inc()
				f.cooldown[s.ID] = time.Now() // not at every tick
			}
			if f.runs[s.ID] == r {
				delete(f.runs, s.ID)
			}
			f.mu.Unlock()
			f.poke()
			return
		}
		r.w = w
		f.mu.Unlock()
		_ = w.Run(rctx) // closes w, also when stopped while it was built
	})
	f.log.Info("fleet: contending for a shop", "shop", s.ID)
}

// build builds a shop's pipeline (one of buildsAtOnce) on the member's
// host (its buckets bound).
func (f *Fleet) build(ctx context.Context, s shops.Shop) (*pipeline.Watcher, error) {
	select {
	case f.builds <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-f.builds }()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := f.shopConfig(s)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		return nil, err
	}
	reg := prometheus.WrapRegistererWith(prometheus.Labels{"shop": s.ID}, f.cfg.Registerer)
	return pipeline.New(cfg, pipeline.Options{
		Logger: f.cfg.Logger.With("shop", s.ID), Registerer: reg, Gatherer: f.cfg.Gatherer, Version: f.cfg.Version,
		Replica: f.cfg.Replica, Host: f.host, Now: f.cfg.Now,
	})
}

// membersChanged: a member came, went or changed what it announces; an
// announcement under this member's own key by another process is a clash.
func (f *Fleet) membersChanged(key string, gone bool) {
	f.mu.Lock()
	if gone {
		f.memberGone(key, time.Now())
	} else {
		f.memberBack(key)
	}
	if !gone && key == memberKey(f.cfg.Instance) {
		if m, ok := f.members[key]; ok {
			f.noteClashLocked(m)
		}
	}
	f.mu.Unlock()
	f.poke()
}

// leaseChanged: a shop's lease changed hands (a pipeline of this member
// waiting for a lease gone is woken by the host, which watches the
// bucket once for all of them).
func (f *Fleet) leaseChanged(string, bool) { f.poke() }

// stopLocked stops a shop's pipeline in the background (it flushes,
// writes its last checkpoint and releases its lease); the shop leaves
// runs once it has.
func (f *Fleet) stopLocked(r *run, why string) {
	if r.reason != "" {
		return
	}
	r.reason = why
	f.stopping[r] = struct{}{}
	f.log.Info("fleet: giving a shop up", "shop", r.shop.ID, "why", why)
	r.cancel()
	go func() {
		<-r.done
		f.mu.Lock()
		delete(f.stopping, r)
		if f.runs[r.shop.ID] == r {
			delete(f.runs, r.shop.ID)
		}
		f.mu.Unlock()
		f.poke()
	}()
}

// shutdown stops every pipeline and waits for them.
func (f *Fleet) shutdown() {
	f.mu.Lock()
	for _, r := range f.runs {
		f.stopLocked(r, "shutting down")
	}
	f.mu.Unlock()
	f.wg.Wait()
}
