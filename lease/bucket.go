package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The buckets the watcher owns (the lease, the checkpoints, the snapshot
// dumps) can vanish under a running group: an operator deletes one, a
// server loses its store. The handles Bucket, CheckpointBucket and
// ObjectStore return therefore check, when a request fails with anything
// but a key-level answer, whether the bucket still exists; when it does
// not, they create it again with the same configuration and repeat the
// request once. What the bucket held is gone: the lease (see Lease on a
// young bucket), the checkpoint (Checkpoints.Write creates it again) and
// the dump (the next one is written on schedule).

// BucketOption configures a bucket the watcher creates.
type BucketOption func(*bucketOptions)

type bucketOptions struct {
	replicas  int
	noMarkers bool
	log       *slog.Logger
}

// Replicas is the number of replicas of the bucket [1 for a bucket
// created, an existing one's unchanged]. Pass the event stream's: on a
// NATS cluster a bucket with one replica makes its node a single point of
// failure for every replica of the group. An existing bucket with other
// replicas is changed to n (a failure to change it is logged: the bucket
// works with the replicas it has).
func Replicas(n int) BucketOption {
	return func(o *bucketOptions) { o.replicas = max(n, 1) }
}

// BucketLogger is where a bucket's recreation is logged [discarded].
func BucketLogger(l *slog.Logger) BucketOption {
	return func(o *bucketOptions) { o.log = l }
}

func options(opts []BucketOption) bucketOptions {
	var o bucketOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	return o
}

// keeper creates a bucket again when a request finds it gone.
type keeper struct {
	name   string
	exists func(ctx context.Context) error // jetstream.ErrBucketNotFound when gone
	create func(ctx context.Context) error
	log    *slog.Logger
	mu     sync.Mutex // one recreation at a time per handle
	// existed is when a check last found the bucket (guarded by mu): a
	// handle shared by many users (a fleet's pipelines) whose requests
	// all time out at once checks once, not once per request in a row.
	existed time.Time
	// bound is the bucket's creation time (server clock) when it was
	// bound (the lease bucket's, set by Bucket): New starts from it.
	bound time.Time
	// statuses are the handle's reads of the bucket's status, shared.
	statuses statuses
}

// statuses shares a bucket's status among the callers that ask while a
// read is under way: they wait for the next read, which begins after each
// of them asked, so that it says what the bucket was when they asked or
// later, as a read of their own would (Lease.hold reads the status after
// its write to tell a bucket created again). After a member of a fleet
// died, the hundreds of leases acquired at once each read it: a stream
// info request each before, a few in all now.
type statuses struct {
	mu      sync.Mutex
	next    *statusRead // the read the callers asking now wait for; nil: none yet
	reading sync.Mutex  // one read at a time
}

type statusRead struct {
	done chan struct{}
	st   jetstream.KeyValueStatus
	err  error
}

// statusTimeout bounds a shared read of a bucket's status (each caller's
// context bounds its own wait).
const statusTimeout = 5 * time.Second

func (s *statuses) read(ctx context.Context, f func(context.Context) (jetstream.KeyValueStatus, error)) (jetstream.KeyValueStatus, error) {
	s.mu.Lock()
	r := s.next
	if r == nil {
		r = &statusRead{done: make(chan struct{})}
		s.next = r
		go s.run(r, f)
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.st, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run makes the read r once the one under way (if any) is done.
func (s *statuses) run(r *statusRead, f func(context.Context) (jetstream.KeyValueStatus, error)) {
	s.reading.Lock()
	defer s.reading.Unlock()
	s.mu.Lock()
	s.next = nil // who asks from now on waits for the next read: this one begins before they ask
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	r.st, r.err = f(ctx)
	close(r.done)
}

// keyLevel says whether err is an answer about a key or an object (the
// bucket exists), not a failure to reach the bucket.
func keyLevel(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) ||
		errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		errors.Is(err, jetstream.ErrObjectNotFound) || errors.Is(err, jetstream.ErrInvalidKey) ||
		(errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant))
}

// heal says whether the request that failed with err should be repeated:
// the bucket was gone and exists again.
func (k *keeper) heal(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil || keyLevel(err) {
		return false
	}
	failed := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.existed.After(failed.Add(-time.Second)) {
		return false // found there a moment ago, by a check of another failure
	}
	e := k.exists(ctx)
	if e == nil {
		k.existed = time.Now()
	}
	if !errors.Is(e, jetstream.ErrBucketNotFound) {
		return false
	}
	if e := k.create(ctx); e != nil && !errors.Is(e, jetstream.ErrBucketExists) {
		k.log.Warn("a bucket of the group is gone and creating it again failed", "bucket", k.name, "err", e)
		return false
	}
	k.log.Warn("a bucket of the group was gone: created again with its configuration (what it held is lost)", "bucket", k.name, "err", err)
	return true
}

// again runs f, and once more when its failure was a bucket that is gone
// and was created again.
func again[T any](ctx context.Context, k *keeper, f func() (T, error)) (T, error) {
	v, err := f()
	if err != nil && k.heal(ctx, err) {
		v, err = f()
	}
	return v, err
}

// healingKV is a key-value bucket that creates itself again when gone. A
// jetstream handle names its bucket only, so the one bound first serves
// the new bucket too.
type healingKV struct {
	jetstream.KeyValue
	k *keeper
}

func (h healingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return again(ctx, h.k, func() (jetstream.KeyValueEntry, error) { return h.KeyValue.Get(ctx, key) })
}

func (h healingKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return again(ctx, h.k, func() (uint64, error) { return h.KeyValue.Put(ctx, key, value) })
}

func (h healingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	return again(ctx, h.k, func() (uint64, error) { return h.KeyValue.Create(ctx, key, value, opts...) })
}

func (h healingKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	return again(ctx, h.k, func() (uint64, error) { return h.KeyValue.Update(ctx, key, value, rev) })
}

func (h healingKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	_, err := again(ctx, h.k, func() (struct{}, error) { return struct{}{}, h.KeyValue.Delete(ctx, key, opts...) })
	return err
}

func (h healingKV) Watch(ctx context.Context, keys string, opts ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return again(ctx, h.k, func() (jetstream.KeyWatcher, error) { return h.KeyValue.Watch(ctx, keys, opts...) })
}

// Status reads the bucket's status, shared with the other callers of the
// handle that ask at the same time (statuses).
func (h healingKV) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	return h.k.statuses.read(ctx, func(ctx context.Context) (jetstream.KeyValueStatus, error) {
		return again(ctx, h.k, func() (jetstream.KeyValueStatus, error) { return h.KeyValue.Status(ctx) })
	})
}

// keyValue binds the bucket cfg names, creating it with cfg when missing
// (another replica may create it at the same moment); the handle creates
// it again when it is gone. On a server without per-key TTL markers
// (before NATS 2.11) the bucket is created without them (markers only
// wake the standbys sooner; see Lease).
func keyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, o bucketOptions) (jetstream.KeyValue, error) {
	cfg.Replicas = max(o.replicas, 1)
	if o.noMarkers {
		cfg.LimitMarkerTTL = 0
	}
	create := func(ctx context.Context) error {
		_, err := js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
			noMarkers := cfg
			noMarkers.LimitMarkerTTL = 0
			_, err = js.CreateKeyValue(ctx, noMarkers)
		}
		return err
	}
	get := func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, cfg.Bucket) }
	kv, err := bind(ctx, get, create)
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", cfg.Bucket, err)
	}
	cfg.Replicas = setReplicas(ctx, js, "KV_"+cfg.Bucket, cfg.Replicas, o) // created again with these
	return healingKV{KeyValue: kv, k: newKeeper(cfg.Bucket, get, create, o)}, nil
}

// bind gets a bucket, creating it when missing (another replica may
// create it at the same moment).
func bind[T any](ctx context.Context, get func(context.Context) (T, error), create func(context.Context) error) (T, error) {
	b, err := get(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		err = create(ctx)
		if err == nil || errors.Is(err, jetstream.ErrBucketExists) {
			b, err = get(ctx)
		}
	}
	return b, err
}

func newKeeper[T any](name string, get func(context.Context) (T, error), create func(context.Context) error, o bucketOptions) *keeper {
	return &keeper{name: name, create: create, log: o.log, exists: func(ctx context.Context) error {
		_, err := get(ctx)
		return err
	}}
}

// ObjectStore binds the object store cfg names, creating it with cfg and
// opts when missing; the handle creates it again when it is gone (Put,
// Get and GetInfo).
func ObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig, opts ...BucketOption) (jetstream.ObjectStore, error) {
	o := options(opts)
	cfg.Replicas = max(o.replicas, 1)
	create := func(ctx context.Context) error {
		_, err := js.CreateObjectStore(ctx, cfg)
		return err
	}
	get := func(ctx context.Context) (jetstream.ObjectStore, error) { return js.ObjectStore(ctx, cfg.Bucket) }
	obs, err := bind(ctx, get, create)
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", cfg.Bucket, err)
	}
	cfg.Replicas = setReplicas(ctx, js, "OBJ_"+cfg.Bucket, cfg.Replicas, o) // created again with these
	return healingObs{ObjectStore: obs, k: newKeeper(cfg.Bucket, get, create, o)}, nil
}

// setReplicas changes the replicas of the stream behind a bucket to the
// ones asked for (Replicas), when asked and different, and returns the
// replicas in force (def when they cannot be read).
func setReplicas(ctx context.Context, js jetstream.JetStream, stream string, def int, o bucketOptions) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		o.log.Warn("reading a bucket's replicas failed", "stream", stream, "err", err)
		return def
	}
	cfg := s.CachedInfo().Config
	was := max(cfg.Replicas, 1)
	if o.replicas == 0 || was == o.replicas {
		return was
	}
	cfg.Replicas = o.replicas
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		o.log.Warn("changing a bucket's replicas failed; it keeps its own", "stream", stream, "replicas", was, "want", o.replicas, "err", err)
		return was
	}
	o.log.Info("a bucket's replicas changed", "stream", stream, "from", was, "to", o.replicas)
	return o.replicas
}

// healingObs is an object store that creates itself again when gone.
type healingObs struct {
	jetstream.ObjectStore
	k *keeper
}

// Put reads r once: a repeat after the store was created again would find
// it consumed, so only a reader that can seek back is put again.
func (h healingObs) Put(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) (*jetstream.ObjectInfo, error) {
	info, err := h.ObjectStore.Put(ctx, meta, r)
	if err != nil && h.k.heal(ctx, err) {
		s, ok := r.(io.Seeker)
		if !ok {
			return nil, err
		}
		if _, serr := s.Seek(0, io.SeekStart); serr != nil {
			return nil, err
		}
		info, err = h.ObjectStore.Put(ctx, meta, r)
	}
	return info, err
}

func (h healingObs) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	return again(ctx, h.k, func() (jetstream.ObjectResult, error) { return h.ObjectStore.Get(ctx, name, opts...) })
}

func (h healingObs) GetInfo(ctx context.Context, name string, opts ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error) {
	return again(ctx, h.k, func() (*jetstream.ObjectInfo, error) { return h.ObjectStore.GetInfo(ctx, name, opts...) })
}
