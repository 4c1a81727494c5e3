package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/shopid"
)

// A group's names in NATS carry its shop's id (package shopid): the key
// lease.Key(shop id, stream) names the lease, the checkpoint and the
// snapshot dump. Before shop ids the key was lease.Key(service URL,
// stream), often the same text. A group that still has state under that
// legacy key, and none under the new one, keeps the legacy key (GroupKey):
// an upgrade finds its lease (a replica of the earlier version may hold it
// during a rolling update), checkpoint and dump, but only when the group
// under it names no other shop id: in a fleet, two entries on one URL are
// two shops, and the legacy key of one may be the other's own key.
// `watcher reset` clears both; the group then starts over under the new
// key.

// GroupKey is the key the group uses in the buckets <bucket>_lease,
// _checkpoint and _snapshot: key, or legacy when the group has a
// checkpoint, a lease or a dump under legacy that names no shop id other
// than shop, and no checkpoint under key. Buckets that do not exist hold
// nothing; nothing is created.
func GroupKey(ctx context.Context, nc *nats.Conn, bucket, key, legacy, shop string) (string, error) {
	h, err := existing(ctx, nc, bucket)
	if err != nil {
		return "", err
	}
	return h.groupKey(ctx, key, legacy, shop)
}

// existing binds the group's buckets that exist (nil: not there); it
// creates none.
func existing(ctx context.Context, nc *nats.Conn, bucket string) (h handles, err error) {
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		return h, err
	}
	if h.lease, err = js.KeyValue(ctx, bucket+"_lease"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return h, fmt.Errorf("bucket %s_lease: %w", bucket, err)
	}
	if h.ckpt, err = js.KeyValue(ctx, bucket+"_checkpoint"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return h, fmt.Errorf("bucket %s_checkpoint: %w", bucket, err)
	}
	if h.dumps, err = js.ObjectStore(ctx, bucket+"_snapshot"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return h, fmt.Errorf("object store %s_snapshot: %w", bucket, err)
	}
	return h, nil
}

// handles are the group's buckets (nil: not there).
type handles struct {
	lease, ckpt jetstream.KeyValue
	dumps       jetstream.ObjectStore
}

func (h handles) groupKey(ctx context.Context, key, legacy, shop string) (string, error) {
	if legacy == "" || legacy == key {
		return key, nil
	}
	if found, err := hasKey(ctx, h.ckpt, key); err != nil || found {
		return key, err
	}
	found := false
	for _, kv := range []jetstream.KeyValue{h.ckpt, h.lease} {
		other, ok, err := namesShop(ctx, kv, legacy)
		if err != nil {
			return "", err
		}
		if ok && other != "" && shop != "" && other != shop {
			return key, nil // another shop's own group
		}
		found = found || ok
	}
	if found {
		return legacy, nil
	}
	if h.dumps != nil {
		_, err := h.dumps.GetInfo(ctx, legacy)
		switch {
		case err == nil:
			return legacy, nil
		case !errors.Is(err, jetstream.ErrObjectNotFound):
			return "", fmt.Errorf("snapshot dump %s: %w", legacy, err)
		}
	}
	return key, nil
}

// namesShop reads the value under key (a lease value or a checkpoint,
// both with "shopId"): found, and the shop id it names ("" none: written
// before shop ids, or not JSON).
func namesShop(ctx context.Context, kv jetstream.KeyValue, key string) (shop string, found bool, err error) {
	if kv == nil {
		return "", false, nil
	}
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("%s: %w", key, err)
	}
	var v struct {
		ShopID string `json:"shopId"`
	}
	_ = json.Unmarshal(e.Value(), &v) // an empty or foreign value names no shop
	return v.ShopID, true, nil
}

func hasKey(ctx context.Context, kv jetstream.KeyValue, key string) (bool, error) {
	if kv == nil {
		return false, nil
	}
	_, err := kv.Get(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil
	}
	return false, fmt.Errorf("%s: %w", key, err)
}

// ErrShopConflict is matched by a *ShopConflictError.
var ErrShopConflict = errors.New("the group belongs to another shop")

// ShopConflictError: the group's lease is held by, or its checkpoint was
// written by, a replica of another shop: another shop id, or, where no
// id is given (WATCHER_SHOP_ID), another service URL. The watcher refuses
// to join that group.
type ShopConflictError struct {
	Key, Holder, HolderShop, Shop string
	// HolderID is the id the group's shop had ("" unknown); Derived says
	// that this watcher's id is derived from its URL (no WATCHER_SHOP_ID).
	HolderID string
	Derived  bool
}

func (e *ShopConflictError) Error() string {
	msg := fmt.Sprintf("the group %s belongs to %s of the shop %s, this watcher serves the shop %s: give each shop its own WATCHER_SHOP_ID",
		e.Key, e.Holder, e.HolderShop, e.Shop)
	if e.Derived {
		id := e.HolderID
		if id == "" {
			id = shopid.FromURL(e.HolderShop)
		}
		msg += fmt.Sprintf("; if it is this shop under a new URL, set WATCHER_SHOP_ID=%s on every replica (the shop's id is then its own, not its URL's)", id)
	}
	return msg
}

func (e *ShopConflictError) Unwrap() error { return ErrShopConflict }

// SameShop says whether two service URLs name the same shop (scheme,
// case and a trailing '/' aside).
func SameShop(a, b string) bool { return shopid.FromURL(a) == shopid.FromURL(b) }

// Owner is the shop a watcher serves, for the owner check: its id
// (package shopid) and service URL.
type Owner struct{ ID, URL string }

// explicit says whether the id was given (WATCHER_SHOP_ID), not derived
// from the URL.
func (o Owner) explicit() bool { return o.ID != "" && o.ID != shopid.FromURL(o.URL) }

// CheckOwner fails with a *ShopConflictError when the group of key in
// the buckets <bucket>_lease and _checkpoint belongs to another shop than
// owner; nil when it is free, this shop's, or an earlier version's (no
// shop named), or when the buckets do not exist yet.
func CheckOwner(ctx context.Context, nc *nats.Conn, bucket, key string, owner Owner) error {
	h, err := existing(ctx, nc, bucket)
	if err != nil {
		return err
	}
	_, err = h.owner(ctx, key, owner)
	return err
}

// owner fails with a *ShopConflictError when the lease of key is held by,
// or its checkpoint was written by, a replica of another shop than o. A
// shop is its id: with an id recorded, the ids decide; without one (an
// earlier version), an explicit id (the key is that id's) makes it this
// shop, a derived one compares the URLs. It returns the URL the group
// recorded when it differs from o's (the same shop under a new URL).
func (h handles) owner(ctx context.Context, key string, o Owner) (urlBefore string, err error) {
	check := func(who, url, id string) (string, error) {
		switch {
		case url == "" && id == "": // an earlier version's: no shop named
			return "", nil
		case id != "" && id == shopid.Resolve(o.ID, o.URL), id == "" && (o.explicit() || SameShop(url, o.URL)):
			if url != "" && !SameShop(url, o.URL) {
				return url, nil
			}
			return "", nil
		}
		return "", &ShopConflictError{Key: key, Holder: who, HolderShop: url, Shop: o.URL, HolderID: id, Derived: !o.explicit()}
	}
	if h.lease != nil {
		v, found, err := lease.New(h.lease, time.Second, lease.Config{Key: key}).Holder(ctx)
		if err != nil {
			return "", err
		}
		if found {
			return check(v.Instance, v.Shop, v.ShopID)
		}
	}
	if h.ckpt != nil {
		cp, found, err := lease.NewCheckpoints(h.ckpt, key).Read(ctx)
		if err != nil && !errors.Is(err, lease.ErrCorrupt) {
			return "", err
		}
		if found {
			return check(cp.Instance+" (its checkpoint)", cp.Shop, cp.ShopID)
		}
	}
	return "", nil
}
