// Package lease makes one replica of a group the active one: a lease in a
// NATS JetStream key-value bucket whose TTL is the bucket's (every revision
// of the key expires TTL after it was written; the server then places a
// delete marker that watchers see). It also keeps the active replica's
// checkpoint (checkpoint.go). It knows nothing of what the replicas do.
//
// # Exclusivity
//
// The key is created with Create (only when it holds no live value) and
// renewed with Update on the holder's last revision, well inside the TTL
// (every TTL/3). Both are compare-and-set operations of the server, so at
// most one process holds a given revision; a renewal that finds another
// revision (the key expired and was taken) demotes the holder at once.
// Two processes with the same instance id are told apart by a random nonce
// per process in the value.
//
// # Fencing
//
// The holder's deadline is measured on its own monotonic clock (one that
// counts through a system suspend, clock.go): the moment
// it *sent* the last successful renewal (or creation) plus the TTL minus a
// margin. The server stamps the revision when it receives it, after that
// moment, so the key cannot expire before the local deadline. Gate, checked
// before every call to the shop and every publish, fails once the deadline
// has passed, without a network round trip: a process that was paused or
// partitioned for longer than the lease stops before its next call even
// though it has not yet heard that it lost the lease.
//
// The key expires on the server TTL after the revision was stamped, no
// earlier, whether the bucket has per-key TTL markers (NATS 2.11 on) or
// not (2.10: the bucket's max age removes the revision; Bucket creates it
// without markers there). Create succeeds only once the revision is gone,
// so no other process holds the key before this deadline on any server
// release; the markers only tell the standbys at once (without them a
// standby finds the key free at its next attempt, every TTL/3).
//
// A bucket deleted and created again (by an operator, or by a handle of
// this package that found it gone, see bucket.go) holds no key, while the
// last holder of the old bucket may still run on its deadline. A process
// that acquires the key in a bucket created after it first saw the bucket
// is therefore active only a TTL after the new bucket's creation (both
// instants stamped by the server), when that holder's deadline has
// passed: at most one holder before its deadline, also across a
// recreation. (A process that first sees the bucket after it was created
// again cannot tell; the old holder then stops at its next renewal, within
// TTL/3.)
//
// # Handover
//
// Release (SIGTERM) deletes the key on the holder's revision; the standbys
// watch the key and try Create as soon as they see the delete (or the
// marker of an expiry), and every renewal interval in any case.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotActive is returned by Gate when this process does not hold the
// lease (or its deadline has passed).
var ErrNotActive = errors.New("not the active replica: the lease is not held")

// DefaultTTL is the lease's time to live when none is configured.
const DefaultTTL = 9 * time.Second

// Value is what the key holds: who holds the lease.
type Value struct {
	Instance string `json:"instance"`
	Host     string `json:"host"`
	Nonce    string `json:"nonce"` // random per process: two processes with one instance id differ here
	File     string `json:"file,omitempty"`
	Lock     string `json:"lock,omitempty"` // the state file's lock (Config.Lock)
	// Shop names the shop the group serves (the service URL): a replica
	// of another shop under the same key refuses to join the group.
	Shop string `json:"shop,omitempty"`
	// ShopID is the shop's id (package shopid): the shop's identity; Shop
	// may change under it (a new URL of the same shop).
	ShopID  string    `json:"shopId,omitempty"`
	Since   time.Time `json:"since"`   // when this process acquired it (wall clock)
	Expires time.Time `json:"expires"` // informational: the writer's wall clock + TTL at the last renewal
}

// Config configures a Lease.
type Config struct {
	Key      string // the key (see Key)
	Instance string // WATCHER_INSTANCE_ID
	Host     string
	// File identifies the holder's state file (a random id kept in it). A
	// live value with this process's instance, host and file was written
	// by an earlier process on the same file, which holds the file's lock
	// exclusively: that process is gone, and its lease is taken over at
	// once instead of after the TTL (a single replica restarts as fast as
	// it did without the lease). That holds only for the same file, not a
	// copy of it (which carries the same id while the original may still
	// run): the value must also name the same Lock.
	File string
	// Lock names the file whose exclusive lock this process holds (its
	// device and inode, state.Store.LockID): a copy of the state file has
	// another. Empty: the shortcut above is off (the lease is taken once
	// it expired).
	Lock string
	// Shop and ShopID name the shop in the value (Value.Shop, ShopID) and
	// in the checkpoints; opaque here.
	Shop, ShopID string
	// Renew is the time between renewals [TTL/3].
	Renew time.Duration
	// Margin is taken off the TTL for the local deadline [TTL/5].
	Margin time.Duration
	Logger *slog.Logger
	// OnChange is called (from Run's goroutine, or from Checkpoints.Write's
	// when it finds that another replica is active) when this process
	// becomes the active replica or stops being it. It must not block.
	OnChange func(active bool)
	// Now is the wall clock of the value's informational times [time.Now].
	Now func() time.Time
	// Mono is the time elapsed on a clock that is never stepped and counts
	// through a system suspend [since New, clock.go].
	Mono func() time.Duration
	// NoWatch: Run does not watch the key (a consumer per lease); a
	// process that watches the whole bucket (a fleet) calls Wake when the
	// key is deleted or expires. Without a Wake the lease finds the key
	// free at its next attempt (every Renew).
	NoWatch bool
}

// Lease is one process's view of the group's lease.
type Lease struct {
	kv    jetstream.KeyValue
	cfg   Config
	ttl   time.Duration
	nonce string
	log   *slog.Logger

	mu       sync.Mutex
	rev      uint64        // the revision this process wrote last; 0 = none
	deadline time.Duration // on Mono; meaningful while active
	active   bool          // holding the key (renewing it)
	since    time.Time
	epoch    uint64 // the revision at which the current tenure began
	// notBefore (on Mono) is when a key held in a bucket created again
	// makes this process active (see the hold in acquire); announced says
	// whether OnChange(true) was called for the current tenure.
	notBefore time.Duration
	announced bool
	// unsure: the bucket's status could not be read after the key was
	// written (hold), so the whole TTL is waited out unless a later read
	// (recheck) finds the bucket first seen still there.
	unsure  bool
	created time.Time // the bucket's creation (server clock) when first seen

	// server is a lower bound of the NATS server's clock at the reading
	// serverAt of Mono (ServerNow); zero before a stamp was read.
	server   time.Time
	serverAt time.Duration

	wake      chan struct{}
	warnCopy  sync.Once
	firstOnce sync.Once
	first     chan struct{} // closed after the first attempt to acquire
}

// Key is the key of a group: the shop (its id, see package shopid; before
// shop ids: its URL) and the stream, sanitized to the key rules (letters,
// digits, '-', '_', '=' and '.' between tokens).
func Key(shop, stream string) string {
	clean := func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
		s = strings.TrimRight(s, "/")
		var b strings.Builder
		for _, r := range s {
			switch {
			case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
				b.WriteRune(r)
			default:
				b.WriteByte('_')
			}
		}
		if b.Len() == 0 {
			return "_"
		}
		return b.String()
	}
	return clean(shop) + "." + clean(stream)
}

// Bucket returns the lease bucket, creating it with the TTL when missing
// (and again whenever it is found gone, see bucket.go). An existing bucket
// keeps its TTL (all replicas of a group must agree on it): the TTL in
// force is returned and used by New. On a server with per-key TTL markers
// (NATS 2.11 on) an expiry leaves a delete marker that wakes the standbys;
// on an older one the bucket is created without them (see Fencing).
func Bucket(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration, opts ...BucketOption) (jetstream.KeyValue, time.Duration, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	o := options(opts)
	cfg := jetstream.KeyValueConfig{
		Bucket:         name,
		Description:    "orderwatch: which replica of a group is active (key per shop and stream)",
		History:        1,
		TTL:            ttl,
		LimitMarkerTTL: ttl, // expiries become delete markers that the standbys watch
		Storage:        jetstream.FileStorage,
	}
	kv, err := keyValue(ctx, js, cfg, o)
	if err != nil {
		return nil, 0, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("lease bucket %s: %w", name, err)
	}
	if st.TTL() <= 0 {
		return nil, 0, fmt.Errorf("lease bucket %s has no TTL: a lease would never expire; delete the bucket (nats kv del %s) and let the watcher create it", name, name)
	}
	if st.TTL() != ttl {
		// Created again when gone with the TTL in force, not this
		// process's configured one.
		cfg.TTL, cfg.LimitMarkerTTL = st.TTL(), st.TTL()
		if kv, err = keyValue(ctx, js, cfg, o); err != nil {
			return nil, 0, err
		}
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		kv.(healingKV).k.bound = bs.StreamInfo().Created // the bucket New's lease first saw
	}
	return kv, st.TTL(), nil
}

// New returns the lease of this process on kv; ttl is the bucket's.
// It makes no request; Run does.
func New(kv jetstream.KeyValue, ttl time.Duration, cfg Config) *Lease {
	if cfg.Renew <= 0 {
		cfg.Renew = ttl / 3
	}
	if cfg.Margin <= 0 {
		cfg.Margin = ttl / 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Mono == nil {
		clock := elapsed
		start := clock()
		cfg.Mono = func() time.Duration { return clock() - start }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	l := &Lease{kv: kv, cfg: cfg, ttl: ttl, nonce: hex.EncodeToString(b[:]), log: log.With("component", "lease"), wake: make(chan struct{}, 1), first: make(chan struct{})}
	if h, ok := kv.(healingKV); ok {
		// The bucket as Bucket bound it: one created again after that is
		// told apart (hold). Another KeyValue: the bucket as first seen
		// by acquire.
		l.created = h.k.bound
	}
	return l
}

// TTL is the lease's time to live (the bucket's).
func (l *Lease) TTL() time.Duration { return l.ttl }

// Nonce is this process's random id in the value.
func (l *Lease) Nonce() string { return l.nonce }

// Gate returns nil while this process holds the lease and its local
// deadline has not passed; ErrNotActive otherwise. No network round trip.
func (l *Lease) Gate() error {
	if !l.Active() {
		return ErrNotActive
	}
	return nil
}

// Active reports whether this process holds the lease now (before its
// local deadline).
func (l *Lease) Active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Mono()
	return l.active && now < l.deadline && now >= l.notBefore
}

// Deadline is the wall-clock time (now + what is left on the monotonic
// clock) after which this process no longer calls or publishes; zero when
// not active.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active || l.cfg.Mono() < l.notBefore {
		return time.Time{}
	}
	return l.cfg.Now().Add(l.deadline - l.cfg.Mono())
}

// Epoch is the revision at which the current tenure began (0 when not
// active): it names the tenure in the checkpoints written during it.
func (l *Lease) Epoch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return 0
	}
	return l.epoch
}

// Writer names this process's current tenure (the writer of the
// checkpoints it writes); Epoch 0 when not active.
func (l *Lease) Writer() Writer {
	return Writer{Instance: l.cfg.Instance, Nonce: l.nonce, File: l.cfg.File, Epoch: l.Epoch()}
}

// Decided is closed once Run made its first attempt to acquire the lease:
// Active then says whether this process started as the active replica.
func (l *Lease) Decided() <-chan struct{} { return l.first }

// Value is this process's value (instance, host, since).
func (l *Lease) Value() Value {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Value{Instance: l.cfg.Instance, Host: l.cfg.Host, Nonce: l.nonce, File: l.cfg.File, Lock: l.cfg.Lock, Shop: l.cfg.Shop, ShopID: l.cfg.ShopID, Since: l.since}
}

// Holder reads the key: who holds the lease now (found false when nobody).
func (l *Lease) Holder(ctx context.Context) (v Value, found bool, err error) {
	e, err := l.kv.Get(ctx, l.cfg.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return Value{}, false, nil
	}
	if err != nil {
		return Value{}, false, fmt.Errorf("read lease %s: %w", l.cfg.Key, err)
	}
	l.NoteServerTime(e.Created())
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return Value{}, false, fmt.Errorf("read lease %s: %w", l.cfg.Key, err)
	}
	return v, true, nil
}

// NoteServerTime takes a stamp of the NATS server (an entry's creation
// time) read just now: the server's clock was at least that now.
func (l *Lease) NoteServerTime(stamp time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.cfg.Mono()
	if l.server.IsZero() || stamp.After(l.server.Add(now-l.serverAt)) {
		l.server, l.serverAt = stamp, now
	}
}

// ServerNow is a lower bound of the NATS server's clock now: the newest
// stamp read (NoteServerTime, Holder) carried forward on Mono; false
// before one was read. The group's clock: replicas' wall clocks differ,
// the server's stamps are the same for all of them.
func (l *Lease) ServerNow() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.server.IsZero() {
		return time.Time{}, false
	}
	return l.server.Add(l.cfg.Mono() - l.serverAt), true
}

// Mine says whether v is this process's value.
func (l *Lease) Mine(v Value) bool { return v.Nonce == l.nonce }

func (l *Lease) value(since time.Time) []byte {
	b, _ := json.Marshal(Value{Instance: l.cfg.Instance, Host: l.cfg.Host, Nonce: l.nonce, File: l.cfg.File, Lock: l.cfg.Lock, Shop: l.cfg.Shop, ShopID: l.cfg.ShopID, Since: since.UTC(), Expires: l.cfg.Now().Add(l.ttl).UTC()})
	return b
}

// Run holds or waits for the lease until ctx ends, then releases it when
// held. It returns nil after ctx ends.
func (l *Lease) Run(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !l.cfg.NoWatch {
		go l.watch(wctx)
	}
	for {
		wait := l.step(ctx)
		l.firstOnce.Do(func() { close(l.first) })
		if ctx.Err() != nil {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-l.wake:
		}
		t.Stop()
		if ctx.Err() != nil {
			break
		}
	}
	l.firstOnce.Do(func() { close(l.first) })
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer rcancel()
	if err := l.Release(rctx); err != nil {
		l.log.Warn("releasing the lease failed; a standby takes over when it expires", "err", err)
	}
	return nil
}

// step acquires, renews or notices the end of the lease; it returns how
// long to wait before the next step.
func (l *Lease) step(ctx context.Context) time.Duration {
	l.mu.Lock()
	active, rev, deadline := l.active, l.rev, l.deadline
	l.mu.Unlock()
	if active && l.cfg.Mono() >= deadline {
		l.demote("the lease's deadline passed without a renewal")
		active = false
	}
	if !active {
		return l.acquire(ctx, rev)
	}
	wait := l.renew(ctx, rev)
	l.mu.Lock()
	unsure := l.active && !l.announced && l.unsure
	l.mu.Unlock()
	if unsure {
		l.recheck(ctx)
	}
	l.mu.Lock()
	now := l.cfg.Mono()
	announce := l.active && !l.announced && now >= l.notBefore && now < l.deadline
	if announce {
		l.announced = true
	}
	if l.active && !l.announced {
		wait = min(wait, max(l.notBefore-now, 0))
		if l.unsure {
			wait = min(wait, 500*time.Millisecond)
		}
	}
	l.mu.Unlock()
	if announce {
		l.log.Info("the bucket's earlier holders are past their deadline: this replica is active", "key", l.cfg.Key)
		if l.cfg.OnChange != nil {
			l.cfg.OnChange(true)
		}
	}
	return wait
}

// renew renews the lease on revision rev (see renewal for how long it
// waits); the next renewal goes out a renewal interval after this one was
// first sent.
func (l *Lease) renew(ctx context.Context, rev uint64) time.Duration {
	first := l.cfg.Mono()
	l.mu.Lock()
	since, left := l.since, l.deadline-first
	l.mu.Unlock()
	newRev, sent, err := l.renewal(ctx, rev, l.value(since), max(left, l.cfg.Renew))
	switch {
	case err == nil:
		l.mu.Lock()
		l.rev, l.deadline = newRev, sent+l.ttl-l.cfg.Margin
		l.mu.Unlock()
		return max(l.cfg.Renew-(l.cfg.Mono()-first), 0)
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch) && l.stillMine(ctx):
		// A renewal whose answer was lost reached the server: the key
		// holds this process's value at a later revision (stillMine
		// adopted it). The deadline stays that of the last answered
		// renewal; the next one, at once, moves it.
		return 0
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		l.mu.Lock()
		l.rev = 0
		l.mu.Unlock()
		l.demote("the lease was taken or expired: " + err.Error())
		return 0
	case ctx.Err() != nil:
		return 0
	default:
		l.log.Warn("renewing the lease failed; retrying until its deadline", "err", err)
		l.mu.Lock()
		left := l.deadline - l.cfg.Mono()
		l.mu.Unlock()
		return min(max(left, 0), 500*time.Millisecond)
	}
}

// stillMine reads the key after a renewal found another revision: when
// its live value is this process's own (same nonce: a renewal whose
// answer was lost), the lease adopts that revision and says true. Only
// this process writes values with its nonce, so no other process held
// the key in between.
func (l *Lease) stillMine(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, l.cfg.Renew)
	defer cancel()
	e, err := l.kv.Get(rctx, l.cfg.Key)
	if err != nil {
		return false
	}
	var v Value
	if json.Unmarshal(e.Value(), &v) != nil || !l.Mine(v) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.active {
		return false
	}
	l.rev = e.Revision()
	l.log.Info("a renewal's answer was lost but the renewal reached the server: the lease is still this replica's", "revision", e.Revision())
	return true
}

func (l *Lease) acquire(ctx context.Context, rev uint64) time.Duration {
	now := l.cfg.Now()
	sent := l.cfg.Mono()
	rctx, cancel := context.WithTimeout(ctx, l.cfg.Renew)
	defer cancel()
	var newRev uint64
	var err error
	l.sawBucket(ctx)
	if rev != 0 {
		// Lapsed locally but maybe still ours on the server: the same
		// revision means nobody held it in between.
		newRev, err = l.kv.Update(rctx, l.cfg.Key, l.value(now), rev)
	} else {
		newRev, err = l.kv.Create(rctx, l.cfg.Key, l.value(now))
		if errors.Is(err, jetstream.ErrKeyExists) {
			newRev, err = l.takeOwnStale(rctx, now)
		}
	}
	switch {
	case err == nil:
		hold, at := l.hold(rctx, newRev)
		l.mu.Lock()
		l.rev, l.deadline, l.active, l.since, l.epoch = newRev, sent+l.ttl-l.cfg.Margin, true, now, newRev
		l.notBefore, l.announced = at+hold, hold <= 0
		l.mu.Unlock()
		if hold > 0 {
			l.mu.Lock()
			unsure := l.unsure
			l.mu.Unlock()
			if unsure {
				l.log.Warn("holding the lease; the bucket's status could not be read, so whether it was created again is not known: active once a read finds it is not, or a TTL from now", "key", l.cfg.Key, "revision", newRev)
				return min(l.cfg.Renew, 500*time.Millisecond)
			}
			l.log.Warn("holding the lease of a bucket created again: active once a holder of the bucket before can no longer be", "key", l.cfg.Key, "revision", newRev, "wait", hold.String())
			return min(l.cfg.Renew, hold)
		}
		l.log.Info("holding the lease: this replica is active", "key", l.cfg.Key, "instance", l.cfg.Instance, "revision", newRev, "ttl", l.ttl.String())
		if l.cfg.OnChange != nil {
			l.cfg.OnChange(true)
		}
		return l.cfg.Renew
	case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		l.mu.Lock()
		l.rev = 0
		l.mu.Unlock()
		return l.cfg.Renew
	case ctx.Err() != nil:
		return 0
	default:
		l.log.Warn("acquiring the lease failed", "err", err)
		return l.cfg.Renew
	}
}

// takeOwnStale takes over a live value written by this process or by an
// earlier process on this state file (see Config.File and Config.Lock:
// the same file, whose lock this process holds, not a copy); ErrKeyExists
// otherwise.
func (l *Lease) takeOwnStale(ctx context.Context, now time.Time) (uint64, error) {
	e, err := l.kv.Get(ctx, l.cfg.Key)
	if err != nil {
		return 0, jetstream.ErrKeyExists
	}
	var v Value
	if json.Unmarshal(e.Value(), &v) == nil && l.Mine(v) {
		// This process's own live value (a renewal whose answer was
		// lost, then the local deadline passed): nobody held it since.
		return l.kv.Update(ctx, l.cfg.Key, l.value(now), e.Revision())
	}
	if l.cfg.File == "" || l.cfg.Lock == "" {
		return 0, jetstream.ErrKeyExists
	}
	if json.Unmarshal(e.Value(), &v) != nil || v.Instance != l.cfg.Instance || v.Host != l.cfg.Host || v.File != l.cfg.File || v.Nonce == l.nonce {
		return 0, jetstream.ErrKeyExists
	}
	if v.Lock != l.cfg.Lock {
		// The same file id on another file: a copy of the state file, whose
		// original may still run. Not proof that the holder is gone.
		l.warnCopy.Do(func() {
			l.log.Error("the lease is held under this instance id by a process on a copy of this state file (same file id, another file): not taking it over before it expires; give each replica its own state file",
				"holder_host", v.Host, "holder_lock", v.Lock, "this_lock", l.cfg.Lock, "since", v.Since)
		})
		return 0, jetstream.ErrKeyExists
	}
	l.log.Info("the lease is held by an earlier process on this state file, which is gone: taking it over", "since", v.Since)
	return l.kv.Update(ctx, l.cfg.Key, l.value(now), e.Revision())
}

// sawBucket notes the bucket's creation time the first time it is seen
// (when Bucket did not): a later one means the bucket was deleted and
// created again.
func (l *Lease) sawBucket(ctx context.Context) {
	l.mu.Lock()
	seen := !l.created.IsZero()
	l.mu.Unlock()
	if seen {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, max(l.cfg.Renew, 2*time.Second))
	defer cancel()
	if created, err := l.bucketCreated(ctx); err == nil {
		l.mu.Lock()
		if l.created.IsZero() {
			l.created = created
		}
		l.mu.Unlock()
	}
}

func (l *Lease) bucketCreated(ctx context.Context) (time.Time, error) {
	st, err := l.kv.Status(ctx)
	if err != nil {
		return time.Time{}, err
	}
	// The status's interface has no creation time; the concrete type of
	// nats.go has. Without it a recreated bucket goes unnoticed, which is
	// said loudly (TestLeaseBucketDeletedIsCreatedAgain fails then).
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		err := fmt.Errorf("lease bucket: no creation time in its status (%T)", st)
		l.log.Error("a lease bucket created again cannot be told from the one before: a holder of the old bucket may overlap with the new one until its next renewal", "err", err)
		return time.Time{}, err
	}
	return bs.StreamInfo().Created, nil
}

// hold is how long a key just written at revision rev must be held before
// this process is active, and the moment (Mono) it counts from. A bucket
// created again after this process first saw it may have been deleted
// under a holder that still runs on its deadline (at most a TTL after its
// last renewal, which reached the old bucket before it was deleted, hence
// before the new one was created): the new holder is active only a TTL
// after the bucket's creation, both instants stamped by the server, the
// wait counted from the moment the entry's stamp was read (after it was
// made). Zero for the bucket this process first saw (a bucket deleted and
// created again before a process starts is not detected: a holder of the
// old bucket still running stops at its next renewal, TTL/3 at most).
func (l *Lease) hold(ctx context.Context, rev uint64) (time.Duration, time.Duration) {
	l.mu.Lock()
	first := l.created
	l.unsure = false
	l.mu.Unlock()
	created, err := l.bucketCreated(ctx)
	switch {
	case err != nil && first.IsZero():
		return 0, 0
	case err != nil:
		// Cannot tell: a whole TTL, unless recheck can tell sooner.
		l.mu.Lock()
		l.unsure = true
		l.mu.Unlock()
		return l.ttl, l.cfg.Mono()
	case first.IsZero():
		l.mu.Lock()
		l.created = created
		l.mu.Unlock()
		return 0, 0
	case created.Equal(first):
		return 0, 0
	}
	e, err := l.kv.Get(ctx, l.cfg.Key)
	at := l.cfg.Mono()
	l.mu.Lock()
	l.created = created
	l.mu.Unlock()
	if err != nil || e.Revision() != rev {
		return l.ttl, at // cannot tell when the entry was stamped: a whole TTL
	}
	return created.Add(l.ttl).Sub(e.Created()), at
}

// recheck reads the bucket's status again for a lease held while it could
// not be read (hold, unsure): the bucket first seen is still there, so the
// key was written in it and the lease is active now (as hold says for
// that bucket); one created again keeps the whole TTL's wait.
func (l *Lease) recheck(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Renew)
	defer cancel()
	created, err := l.bucketCreated(ctx)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unsure = false
	if created.Equal(l.created) {
		l.notBefore = l.cfg.Mono()
		return
	}
	l.created = created
}

func (l *Lease) demote(why string) {
	l.mu.Lock()
	was := l.active && l.announced
	l.active = false
	l.mu.Unlock()
	if !was {
		return
	}
	l.log.Warn("lost the lease: this replica is a standby now", "why", why)
	if l.cfg.OnChange != nil {
		l.cfg.OnChange(false)
	}
}

// Release gives the lease up (delete on the holder's revision) so that a
// standby takes over at once. It is a no-op when not held.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	rev, active := l.rev, l.active && l.announced
	l.active, l.rev = false, 0
	l.mu.Unlock()
	if rev == 0 {
		return nil
	}
	if active && l.cfg.OnChange != nil {
		l.cfg.OnChange(false)
	}
	if err := l.kv.Delete(ctx, l.cfg.Key, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return fmt.Errorf("release lease %s: %w", l.cfg.Key, err)
	}
	l.log.Info("released the lease")
	return nil
}

// Wake makes Run try to acquire (or renew) now: the key was seen deleted
// or expired (Config.NoWatch).
func (l *Lease) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// watch wakes Run when the key is deleted or expires.
func (l *Lease) watch(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := l.kv.Watch(ctx, l.cfg.Key, jetstream.UpdatesOnly())
		if err != nil {
			t := time.NewTimer(l.cfg.Renew)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			continue
		}
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				l.Wake()
			}
		}
		_ = w.Stop()
	}
}

// renewal sends the renewal (Update on rev) and waits for its answer
// until wait has passed (the lease's deadline): on a machine or a server
// short of CPU an answer may come after a renewal interval, and it still
// moves the deadline, to the moment its request was sent (returned) plus
// the TTL minus the margin. (Giving up after one interval lost that
// success, the retries found another revision, read it back and renewed
// again, three requests on a loaded server, and the holder was demoted at
// the deadline of its last answered renewal.) An answer may also never
// come (lost in a reconnect): when none came within a renewal interval,
// the renewal is sent once more on the same revision, while the first
// one's answer is still awaited. At most one of the two is written; the
// first success wins, and a revision mismatch (the first one was written,
// or another process took the key) returns at once, to be read back
// (stillMine) while the deadline is still ahead.
func (l *Lease) renewal(ctx context.Context, rev uint64, value []byte, wait time.Duration) (uint64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	type answer struct {
		rev  uint64
		sent time.Duration
		err  error
	}
	answers := make(chan answer, 2)
	send := func() {
		sent := l.cfg.Mono()
		go func() {
			r, err := l.update(ctx, rev, value)
			answers <- answer{r, sent, err}
		}()
	}
	send()
	again := time.NewTimer(l.cfg.Renew)
	defer again.Stop()
	var last answer
	for pending, twice := 1, false; pending > 0; {
		select {
		case a := <-answers:
			pending--
			if a.err == nil || errors.Is(a.err, jetstream.ErrKeyRevisionMismatch) {
				return a.rev, a.sent, a.err
			}
			last = a
		case <-again.C:
			if !twice {
				twice, pending = true, pending+1
				send()
			}
		}
	}
	return 0, 0, last.err
}

// update renews the key at revision rev.
func (l *Lease) update(ctx context.Context, rev uint64, value []byte) (uint64, error) {
	return l.kv.Update(ctx, l.cfg.Key, value, rev)
}
