package events

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Deduper remembers the ids of the events a consumer has handled, for a
// window, and which ids are being handled right now. Events reach a
// consumer at least once (docs/consuming.md, "Delivery guarantee"): a
// message not acknowledged in time is delivered again, also to another
// instance of the same durable consumer while the first still works on it,
// and a replay delivers events seen before. Keyed by the event id (by Key
// when the consumer reads several shops), a second copy is recognised.
//
// The window must cover the longest time between two copies of an event
// the consumer must not handle twice: for redelivery, AckWait x MaxDeliver
// (plus the backoff between deliveries) and the time the consumer may be
// down with messages unacknowledged; for a replay, how far back it goes.
// Memory forgets everything on a restart; KV does not, and is shared by
// every instance of the consumer.
type Deduper interface {
	// Claim takes id for the caller: true when nobody handled it within
	// the window and nobody holds a claim on it; false when it was handled
	// (Done); an error wrapping ErrInProgress when another caller holds an
	// unexpired claim. Taking the claim is atomic: of concurrent callers,
	// one gets true.
	Claim(ctx context.Context, id string) (bool, error)
	// Done marks a claimed id as handled: from now on Claim reports false
	// for the window.
	Done(ctx context.Context, id string) error
	// Release gives a claim up without Done, so the next Claim of id
	// succeeds (the handling failed and the event will come again).
	Release(ctx context.Context, id string) error
}

// ErrInProgress is the error of a Claim (and of Once) while another
// caller holds the id's claim: the event is being handled elsewhere. Leave
// the message unacknowledged or Nak it with a delay: if that handling
// succeeds, the next delivery finds the id Done; if it fails, its claim is
// released (or expires) and the next delivery handles the event.
var ErrInProgress = errors.New("event is being handled by another delivery")

// DefaultClaimTTL is how long a claim holds when the claimer neither
// marks the id Done nor releases it (it crashed, or its handler hangs):
// after that another delivery may take the id over. Set it above your
// longest handling (SetClaimTTL); a consumer that crashed while holding a
// claim handles that event again once the claim has expired.
const DefaultClaimTTL = 5 * time.Minute

// settleTimeout bounds marking an id done after its handling and
// releasing a claim after a failed one, also when the caller's context
// has ended meanwhile (a stop while the handler finished its work: the
// work is done and must be recorded).
const settleTimeout = 5 * time.Second

// tokenDeduper is a Deduper whose claims are told apart: Once releases
// its own claim only, never the one of a delivery that took the id over
// after that claim expired (a slow handler that then failed).
type tokenDeduper interface {
	claimToken(ctx context.Context, id string) (token uint64, ok bool, err error)
	releaseToken(ctx context.Context, id string, token uint64) error
}

// Once handles the event with id once per window, also when deliveries of
// it arrive concurrently (an ack wait that ran out while another instance
// of the same durable consumer still works on the message): it claims id
// (Deduper.Claim); when d reports id handled it returns nil without
// calling handle; when another delivery holds the claim it returns an
// error wrapping ErrInProgress without calling handle; else it calls
// handle and, when that succeeds, marks id Done. When handle fails (or
// panics) the claim is released, so a redelivery handles the event.
//
// The caller acknowledges the message after Once returns nil and leaves it
// unacknowledged (or naks it) on an error, so a failed handling is
// retried. When handle succeeds, the id is marked Done also if ctx ended
// meanwhile (the work is done).
//
// The claim holds for the deduper's claim TTL (DefaultClaimTTL): a
// handling that takes longer than that can run twice, because another
// delivery then takes the expired claim over; set the TTL above your
// longest handling. A crash between handle and Done leaves the claim
// until it expires; the redelivery after that handles the event again:
// make handle's effect idempotent where that matters, or accept the rare
// repeat. Deliveries told ErrInProgress count against the consumer's
// MaxDeliver: with a limit, let the naks' delays reach past the claim TTL.
func Once(ctx context.Context, d Deduper, id string, handle func(context.Context) error) error {
	var token uint64
	var claimed bool
	var err error
	td, tokens := d.(tokenDeduper)
	if tokens {
		token, claimed, err = td.claimToken(ctx, id)
	} else {
		claimed, err = d.Claim(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("dedup claim of %s: %w", id, err)
	}
	if !claimed {
		return nil
	}
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	done := false
	defer func() {
		switch {
		case done:
		case tokens:
			_ = td.releaseToken(settle, id, token) // else the claim expires
		default:
			_ = d.Release(settle, id)
		}
	}()
	if err := handle(ctx); err != nil {
		return err
	}
	if err := d.Done(settle, id); err != nil {
		return fmt.Errorf("dedup mark of %s: %w", id, err)
	}
	done = true
	return nil
}

// Memory is an in-process Deduper: the ids marked Done within the last
// TTL, at most max of them (the oldest are forgotten first), and the
// claims being handled. It takes about 160 bytes per id (measured: 100,000
// ids take 16 MB). It forgets everything when the process ends; use KV to
// survive a restart or to share the ids between instances.
type Memory struct {
	mu       sync.Mutex
	ttl      time.Duration
	claimTTL time.Duration
	max      int
	now      func() time.Time
	order    *list.List               // of memEntry, oldest first
	ids      map[string]*list.Element // id -> its element in order
	claims   map[string]memClaim      // id -> its claim
	tokens   uint64                   // the last claim's token
}

type memClaim struct {
	until time.Time // when it expires
	token uint64
}

type memEntry struct {
	id string
	at time.Time
}

// NewMemory returns a Memory that keeps an id for ttl after Done, and at
// most max ids (max > 0; it panics otherwise). now is the clock (nil:
// time.Now). A claim holds for DefaultClaimTTL (SetClaimTTL).
func NewMemory(max int, ttl time.Duration, now func() time.Time) *Memory {
	if max < 1 {
		panic("events.NewMemory: max must be positive")
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{ttl: ttl, claimTTL: DefaultClaimTTL, max: max, now: now, order: list.New(),
		ids: map[string]*list.Element{}, claims: map[string]memClaim{}}
}

// SetClaimTTL sets how long a claim that is neither Done nor released
// holds (DefaultClaimTTL).
func (m *Memory) SetClaimTTL(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claimTTL = d
}

// Seen reports whether id was marked Done within the last TTL and not
// forgotten since for lack of room.
func (m *Memory) Seen(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	_, ok := m.ids[id]
	return ok, nil
}

// Claim takes id unless it is Done or claimed (see Deduper).
func (m *Memory) Claim(ctx context.Context, id string) (bool, error) {
	_, ok, err := m.claimToken(ctx, id)
	return ok, err
}

func (m *Memory) claimToken(_ context.Context, id string) (uint64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	if _, ok := m.ids[id]; ok {
		return 0, false, nil
	}
	now := m.now()
	if c, ok := m.claims[id]; ok && now.Before(c.until) {
		return 0, false, ErrInProgress
	}
	m.tokens++
	m.claims[id] = memClaim{until: now.Add(m.claimTTL), token: m.tokens}
	return m.tokens, true, nil
}

// Release gives up the claim of id.
func (m *Memory) Release(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, id)
	return nil
}

// releaseToken gives up the claim of id if it is still the one of token.
func (m *Memory) releaseToken(_ context.Context, id string, token uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims[id].token == token {
		delete(m.claims, id)
	}
	return nil
}

// Done remembers id from now on for TTL (a repeated Done restarts it) and
// ends its claim.
func (m *Memory) Done(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims, id)
	if el, ok := m.ids[id]; ok {
		m.order.Remove(el)
	}
	m.ids[id] = m.order.PushBack(memEntry{id: id, at: m.now()})
	m.expire()
	return nil
}

// Len is the number of ids remembered.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire()
	return len(m.ids)
}

// expire forgets the ids older than TTL and the oldest beyond max. Entries
// are in the order of their Done, so expiry looks at the front only.
func (m *Memory) expire() {
	now := m.now()
	for el := m.order.Front(); el != nil; el = m.order.Front() {
		e := el.Value.(memEntry)
		if m.order.Len() <= m.max && now.Sub(e.at) < m.ttl {
			return
		}
		m.order.Remove(el)
		delete(m.ids, e.id)
	}
}

// KV is a Deduper in a JetStream key-value bucket: one key per event id,
// whose value is a claim ("claimed until <time>") while a delivery handles
// the event and "done" once it is handled. A claim is taken with the
// bucket's create-if-absent (KeyValue.Create) and an expired claim taken
// over with a compare-and-set on its revision (KeyValue.Update), so of two
// instances that receive the same event at once, one handles it. A claim's
// expiry is read on the claimer's clock: keep the instances' clocks within
// a small part of the claim TTL. The bucket's TTL
// (jetstream.KeyValueConfig.TTL) is the window; its history can be 1. It
// survives restarts of the consumer and is shared by all its instances.
// Create the bucket with CreateKV or beforehand.
type KV struct {
	kv       jetstream.KeyValue
	claimTTL time.Duration
	now      func() time.Time

	mu   sync.Mutex
	held map[string]uint64 // id -> the revision of this instance's claim
}

// Values of a KV key. An earlier version stored an empty value for a
// handled id; it reads as done.
const (
	kvDone       = "done"
	kvClaimUntil = "claimed until "
)

// NewKV returns the Deduper of an existing bucket. A claim holds for
// DefaultClaimTTL (SetClaimTTL).
func NewKV(kv jetstream.KeyValue) *KV {
	return &KV{kv: kv, claimTTL: DefaultClaimTTL, now: time.Now, held: map[string]uint64{}}
}

// SetClaimTTL sets how long a claim that is neither Done nor released
// holds (DefaultClaimTTL). Call it before the first Claim.
func (k *KV) SetClaimTTL(d time.Duration) { k.claimTTL = d }

// CreateKV creates (or updates) the bucket for a KV Deduper with the
// window ttl, one value per key, and returns it.
func CreateKV(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration) (*KV, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: bucket, TTL: ttl, History: 1,
		Description: "orderwatch event ids a consumer has handled",
	})
	if err != nil {
		return nil, fmt.Errorf("dedup bucket %s: %w", bucket, err)
	}
	return NewKV(kv), nil
}

// Seen reports whether the bucket holds id as handled.
func (k *KV) Seen(ctx context.Context, id string) (bool, error) {
	if !keyPattern.MatchString(id) {
		return false, fmt.Errorf("%q is not an event id or Key", id)
	}
	e, err := k.kv.Get(ctx, id)
	switch {
	case err == nil:
		_, claimed := k.claimedUntil(e.Value())
		return !claimed, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	}
	return false, err
}

// Claim takes id unless it is done or claimed (see Deduper).
func (k *KV) Claim(ctx context.Context, id string) (bool, error) {
	rev, ok, err := k.claimToken(ctx, id)
	if ok {
		k.hold(id, rev)
	}
	return ok, err
}

// claimToken takes id; the token is the revision of the claim's key.
func (k *KV) claimToken(ctx context.Context, id string) (uint64, bool, error) {
	if !keyPattern.MatchString(id) {
		return 0, false, fmt.Errorf("%q is not an event id or Key", id)
	}
	for range 3 { // a key deleted (released) between Create and Get is tried again
		rev, err := k.kv.Create(ctx, id, k.claimValue())
		if err == nil {
			return rev, true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, false, err
		}
		e, err := k.kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		until, claimed := k.claimedUntil(e.Value())
		switch {
		case !claimed:
			return 0, false, nil
		case k.now().Before(until):
			return 0, false, ErrInProgress
		}
		// An expired claim: its holder crashed or hangs. Take it over,
		// unless another caller did so first.
		rev, err = k.kv.Update(ctx, id, k.claimValue(), e.Revision())
		switch {
		case err == nil:
			return rev, true, nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
			return 0, false, ErrInProgress
		}
		return 0, false, err
	}
	return 0, false, ErrInProgress
}

// Done stores id as handled. When that fails, a claim of this instance
// still holds (Release gives it up).
func (k *KV) Done(ctx context.Context, id string) error {
	if !keyPattern.MatchString(id) {
		return fmt.Errorf("%q is not an event id or Key", id)
	}
	if _, err := k.kv.PutString(ctx, id, kvDone); err != nil {
		return err
	}
	k.take(id)
	return nil
}

// Release deletes this instance's claim of id, unless another instance
// took the claim over meanwhile (after it expired).
func (k *KV) Release(ctx context.Context, id string) error {
	rev, ok := k.take(id)
	if !ok {
		return nil
	}
	return k.releaseToken(ctx, id, rev)
}

// releaseToken deletes the claim of id whose revision is rev, unless
// another delivery took the claim over meanwhile (after it expired) or
// the id is done.
func (k *KV) releaseToken(ctx context.Context, id string, rev uint64) error {
	err := k.kv.Delete(ctx, id, jetstream.LastRevision(rev))
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
		return nil // no longer ours
	}
	return err
}

func (k *KV) claimValue() []byte {
	return []byte(kvClaimUntil + k.now().Add(k.claimTTL).UTC().Format(time.RFC3339Nano))
}

// claimedUntil reads a key's value: a claim and its expiry, or (false)
// done.
func (k *KV) claimedUntil(v []byte) (time.Time, bool) {
	rest, ok := strings.CutPrefix(string(v), kvClaimUntil)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, rest)
	if err != nil {
		return time.Time{}, true // unreadable: expired, taken over
	}
	return t, true
}

func (k *KV) hold(id string, rev uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[id] = rev
}

func (k *KV) take(id string) (uint64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rev, ok := k.held[id]
	delete(k.held, id)
	return rev, ok
}
