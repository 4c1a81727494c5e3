package events

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SetKVClock sets the clock a KV deduper reads claim expiries with.
func SetKVClock(k *KV, now func() time.Time) { k.now = now }

// KVBucket is the bucket of a KV deduper.
func KVBucket(k *KV) jetstream.KeyValue { return k.kv }
