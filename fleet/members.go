package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// Member is what a member announces in the members bucket, renewed every
// third of the bucket's TTL: a member that stops announcing (killed,
// partitioned) drops out of the others' count after the TTL.
type Member struct {
	Instance string    `json:"instance"`
	Host     string    `json:"host"`
	Nonce    string    `json:"nonce"`
	Shops    int       `json:"shops"` // shops it runs (active or starting)
	Since    time.Time `json:"since"`
	At       time.Time `json:"at"` // the writer's wall clock at this announcement
}

// membersBucket binds the members bucket, creating it with ttl (every
// announcement expires ttl after it was written; the server then places
// a delete marker the other members see).
func membersBucket(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration, replicas int) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if err == nil {
		return kv, nil
	}
	if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("members bucket %s: %w", name, err)
	}
	kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: name, Description: "orderwatch fleet: the live members (one key each, expiring unless renewed)",
		History: 1, TTL: ttl, LimitMarkerTTL: ttl, Storage: jetstream.FileStorage, Replicas: max(replicas, 1),
	})
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

// watchKV follows every key of kv until ctx ends, calling put with each
// live value and del with each deleted or expired key; reset is called
// before a watch starts again (after an error) with the values it will
// report anew.
func watchKV(ctx context.Context, kv jetstream.KeyValue, reset func(), put func(key string, value []byte), del func(key string), retry time.Duration) {
	for ctx.Err() == nil {
		w, err := kv.WatchAll(ctx)
		if err == nil {
			reset()
			for e := range w.Updates() {
				if e == nil {
					continue // the initial values are all delivered
				}
				if e.Operation() == jetstream.KeyValuePut {
					put(e.Key(), e.Value())
				} else {
					del(e.Key())
				}
			}
			_ = w.Stop()
		}
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

func decodeMember(b []byte) (Member, bool) {
	var m Member
	return m, json.Unmarshal(b, &m) == nil && m.Instance != ""
}

func decodeHolder(b []byte) (lease.Value, bool) {
	var v lease.Value
	return v, json.Unmarshal(b, &v) == nil && v.Instance != ""
}
