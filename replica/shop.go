package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	var h handles
	if h.lease, err = js.KeyValue(ctx, bucket+"_lease"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", err
	}
	if h.ckpt, err = js.KeyValue(ctx, bucket+"_checkpoint"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", err
	}
	if h.dumps, err = js.ObjectStore(ctx, bucket+"_snapshot"); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", err
	}
	return h.groupKey(ctx, key, legacy)
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
var ErrShopConflict = errors.New("another shop's watcher holds this group's lease")

// ShopConflictError: the lease key is held by a replica of another shop
// (the same shop id, WATCHER_SHOP_ID, given to two shops). The watcher
// refuses to join that group.
type ShopConflictError struct {
	Key, Holder, HolderShop, Shop string
}

func (e *ShopConflictError) Error() string {
	return fmt.Sprintf("the lease %s is held by %s of the shop %s, this watcher serves the shop %s: give each shop its own WATCHER_SHOP_ID",
		e.Key, e.Holder, e.HolderShop, e.Shop)
}

func (e *ShopConflictError) Unwrap() error { return ErrShopConflict }

// SameShop says whether two service URLs name the same shop (scheme,
// case and a trailing '/' aside).
func SameShop(a, b string) bool { return shopid.FromURL(a) == shopid.FromURL(b) }

// CheckOwner fails with a *ShopConflictError when the lease of key in
// <bucket>_lease is held by a replica of another shop than shopURL; nil
// when it is free, held by this shop or by a replica that names no shop
// (an earlier version), or when the bucket does not exist yet.
func CheckOwner(ctx context.Context, nc *nats.Conn, bucket, key, shopURL string) error {
	v, found, _, err := Holder(ctx, nc, bucket, key)
	if err != nil {
		return err
	}
	if found && v.Shop != "" && !SameShop(v.Shop, shopURL) {
		return &ShopConflictError{Key: key, Holder: v.Instance, HolderShop: v.Shop, Shop: shopURL}
	}
	return nil
}
