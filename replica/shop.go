package replica

import (
	"context"
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
// during a rolling update), checkpoint and dump. `watcher reset` clears
// both; the group then starts over under the new key.

// GroupKey is the key the group uses in the buckets <bucket>_lease,
// _checkpoint and _snapshot: key, or legacy when the group has a
// checkpoint, a lease or a dump under legacy and no checkpoint under key.
// Buckets that do not exist hold nothing; nothing is created.
func GroupKey(ctx context.Context, nc *nats.Conn, bucket, key, legacy string) (string, error) {
	h, err := existing(ctx, nc, bucket)
	if err != nil {
		return "", err
	}
	return h.groupKey(ctx, key, legacy)
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

func (h handles) groupKey(ctx context.Context, key, legacy string) (string, error) {
	if legacy == "" || legacy == key {
		return key, nil
	}
	if found, err := hasKey(ctx, h.ckpt, key); err != nil || found {
		return key, err
	}
	for _, kv := range []jetstream.KeyValue{h.ckpt, h.lease} {
		if found, err := hasKey(ctx, kv, legacy); err != nil || found {
			return legacy, err
		}
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
// written by, a replica of another shop (the same shop id, WATCHER_SHOP_ID,
// given to two shops). The watcher refuses to join that group.
type ShopConflictError struct {
	Key, Holder, HolderShop, Shop string
}

func (e *ShopConflictError) Error() string {
	return fmt.Sprintf("the group %s belongs to %s of the shop %s, this watcher serves the shop %s: give each shop its own WATCHER_SHOP_ID",
		e.Key, e.Holder, e.HolderShop, e.Shop)
}

func (e *ShopConflictError) Unwrap() error { return ErrShopConflict }

// SameShop says whether two service URLs name the same shop (scheme,
// case and a trailing '/' aside).
func SameShop(a, b string) bool { return shopid.FromURL(a) == shopid.FromURL(b) }

// CheckOwner fails with a *ShopConflictError when the group of key in
// the buckets <bucket>_lease and _checkpoint belongs to another shop than
// shopURL (owner); nil when it is free, this shop's, or an earlier
// version's (no shop named), or when the buckets do not exist yet.
func CheckOwner(ctx context.Context, nc *nats.Conn, bucket, key, shopURL string) error {
	h, err := existing(ctx, nc, bucket)
	if err != nil {
		return err
	}
	return h.owner(ctx, key, shopURL)
}

// owner fails with a *ShopConflictError when the lease of key is held by,
// or its checkpoint was written by, a replica of another shop than
// shopURL.
func (h handles) owner(ctx context.Context, key, shopURL string) error {
	conflict := func(who, shop string) error {
		if shop == "" || SameShop(shop, shopURL) {
			return nil
		}
		return &ShopConflictError{Key: key, Holder: who, HolderShop: shop, Shop: shopURL}
	}
	if h.lease != nil {
		v, found, err := lease.New(h.lease, time.Second, lease.Config{Key: key}).Holder(ctx)
		if err != nil {
			return err
		}
		if found {
			return conflict(v.Instance, v.Shop)
		}
	}
	if h.ckpt != nil {
		cp, found, err := lease.NewCheckpoints(h.ckpt, key).Read(ctx)
		if err != nil && !errors.Is(err, lease.ErrCorrupt) {
			return err
		}
		if found {
			return conflict(cp.Instance+" (its checkpoint)", cp.Shop)
		}
	}
	return nil
}
