package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
)

// Member is what a member announces in the members bucket, renewed every
// third of the bucket's TTL: a member that stops announcing (killed,
// partitioned) drops out of the others' count after the TTL.
type Member struct {
	Instance string `json:"instance"`
	Host     string `json:"host"`
	Nonce    string `json:"nonce"`
	Shops    int    `json:"shops"` // shops it runs (active or starting)
	// Starting are the shops whose pipeline it started less than the
	// orphan grace ago and whose lease it does not hold yet (View.Starting).
	Starting []string `json:"starting,omitempty"`
	// Can are the shops it can run: its registry in force (View.Can).
	// Nil: a member of an earlier version, which does not say.
	Can []string `json:"can"`
	// Share is its fair share as it counts it (View.Shares).
	Share int       `json:"share,omitempty"`
	Since time.Time `json:"since"` // the writer's wall clock (informational)
	At    time.Time `json:"at"`    // the writer's wall clock at this announcement (informational)
	// First is the revision of this process's first announcement in the
	// members bucket (0 in that announcement itself: its own revision):
	// of two processes under one name, the one with the higher is the
	// later, in the server's order whatever their clocks say.
	First uint64 `json:"first,omitempty"`

	can  map[string]bool // Can as a set
	rev  uint64          // the announcement's revision in the members bucket
	seen time.Time       // when this member received it (its own clock): a member is judged by when its announcements arrive, not by the writer's clock
}

// membersBucket binds the members bucket, creating it with ttl (every
// announcement expires ttl after it was written; the server then places
// a delete marker the other members see, from NATS 2.11 on; before, the
// bucket has no markers and a member's announcements stop arriving).
func membersBucket(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("members bucket %s: %w", name, err)
	}
	cfg := jetstream.KeyValueConfig{
		Bucket: name, Description: "orderwatch fleet: the live members (one key each, expiring unless renewed)",
		History: 1, TTL: ttl, LimitMarkerTTL: ttl, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	}
	kv, err = js.CreateKeyValue(ctx, cfg)
	if errors.Is(err, jetstream.ErrLimitMarkerTTLNotSupported) {
		// A server before 2.11: no expiry markers; the members judge an
		// announcement by when it arrived (liveMembersLocked).
		cfg.LimitMarkerTTL = 0
		kv, err = js.CreateKeyValue(ctx, cfg)
	}
	if errors.Is(err, jetstream.ErrBucketExists) {
		return js.KeyValue(ctx, name)
	}
	if err != nil {
		return nil, fmt.Errorf("members bucket %s: %w", name, err)
	}
	return kv, nil
}

// memberKey is a member's key: its instance, sanitized to the key rules.
func memberKey(instance string) string {
	var b strings.Builder
	for _, r := range instance {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// followKV keeps *into (guarded by mu) equal to the live keys of kv,
// decoded, until ctx ends: a value that does not decode is left out;
// changed is called after every change (gone: the key was deleted, expired
// or holds no valid value) but a put that same says changes nothing the
// decisions depend on (a lease renewed: no decision at every renewal). A
// watch that fails is started again after a second, from a fresh copy.
func followKV[T any](ctx context.Context, kv jetstream.KeyValue, mu *sync.Mutex, into *map[string]T, decode func(jetstream.KeyValueEntry) (T, bool), same func(a, b T) bool, changed func(key string, gone bool)) {
	pipeline.WatchKV(ctx, kv, follower(mu, into, decode, same, changed))
}

// follower keeps into, under mu, as a watch delivers the entries (nil: a
// watch starts again, forget everything) and calls changed when a key
// came, went or changed (same says whether two values are one).
func follower[T any](mu *sync.Mutex, into *map[string]T, decode func(jetstream.KeyValueEntry) (T, bool), same func(a, b T) bool, changed func(key string, gone bool)) func(jetstream.KeyValueEntry) {
	return func(e jetstream.KeyValueEntry) {
		if e == nil {
			mu.Lock()
			*into = map[string]T{}
			mu.Unlock()
			return
		}
		v, ok := decode(e)
		put := e.Operation() == jetstream.KeyValuePut && ok
		mu.Lock()
		prev, had := (*into)[e.Key()]
		if put {
			(*into)[e.Key()] = v
		} else {
			delete(*into, e.Key())
		}
		mu.Unlock()
		if !put || !had || !same(prev, v) {
			changed(e.Key(), !put)
		}
	}
}

// decodeMember reads an announcement, stamped with its revision and the
// time it arrived.
func decodeMember(e jetstream.KeyValueEntry) (Member, bool) {
	var m Member
	if json.Unmarshal(e.Value(), &m) != nil || m.Instance == "" {
		return m, false
	}
	m.rev, m.seen = e.Revision(), time.Now()
	if m.Can != nil {
		m.can = make(map[string]bool, len(m.Can))
		for _, id := range m.Can {
			m.can[id] = true
		}
	}
	return m, true
}

// sameMember: the same process announcing the same shops, share and
// registry.
func sameMember(a, b Member) bool {
	return a.Instance == b.Instance && a.Nonce == b.Nonce && a.Shops == b.Shops && a.Share == b.Share &&
		(a.Can == nil) == (b.Can == nil) && slices.Equal(a.Can, b.Can)
}

// holder is a shop's lease as the lease bucket's watch last delivered it,
// and when (this member's clock): a holder is judged by when its renewals
// arrive, not by the expiry its writer's clock wrote.
type holder struct {
	lease.Value
	seen time.Time
}

// sameHolder: the same process's tenure (a renewal).
func sameHolder(a, b holder) bool {
	return a.Instance == b.Instance && a.Nonce == b.Nonce && a.Since.Equal(b.Since)
}

func decodeHolder(e jetstream.KeyValueEntry) (holder, bool) {
	var v lease.Value
	if json.Unmarshal(e.Value(), &v) != nil || v.Instance == "" {
		return holder{}, false
	}
	return holder{Value: v, seen: time.Now()}, true
}
