package replica

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/kvwatch"
)

// LimitsKeys is the key filter of every group's limits key of a
// checkpoint bucket: <key>.limits, the group's key being two tokens
// (lease.Key: the shop's and the stream's).
const LimitsKeys = "*.*.limits"

// LimitsFeed is a process's one watch of the groups' limits keys of its
// checkpoint bucket (Config.LimitsFeed), for all its replicas: one
// JetStream consumer per process, not one per active shop (at 1,000
// shops those reached the stream's consumer limit: every further watch
// was refused). Each entry goes to the replicas following its key, in
// the order written; a watch that fails or closes is opened again (after
// Retry when it failed), the replicas following stay registered.
type LimitsFeed struct {
	kv    jetstream.KeyValue
	retry time.Duration

	mu   sync.Mutex
	regs map[string]map[*limitsReg]struct{} // by limits key
}

// limitsReg is one replica's following of its limits key.
type limitsReg struct {
	mu   sync.Mutex // held while f runs: the unregistration waits for it
	live bool
	f    func(jetstream.KeyValueEntry)
}

// NewLimitsFeed returns the feed of the checkpoint bucket kv (the one the
// replicas use, Config.Buckets); a watch that failed is opened again
// after retry [1s]. Run watches.
func NewLimitsFeed(kv jetstream.KeyValue, retry time.Duration) *LimitsFeed {
	if retry <= 0 {
		retry = time.Second
	}
	return &LimitsFeed{kv: kv, retry: retry, regs: map[string]map[*limitsReg]struct{}{}}
}

// Run watches the limits keys (their changes from now on) until ctx ends.
func (f *LimitsFeed) Run(ctx context.Context) {
	watchUpdates(ctx, f.kv, LimitsKeys, f.retry, f.dispatch)
}

// watchUpdates hands take every change of the keys of kv matching keys
// from when its watch opens until ctx ends: a watch that closes is opened
// again at once, one that fails after retry (changes in between are not
// seen).
func watchUpdates(ctx context.Context, kv jetstream.KeyValue, keys string, retry time.Duration, take func(jetstream.KeyValueEntry)) {
	kvwatch.Run(ctx, kv, kvwatch.Options{Keys: keys, UpdatesOnly: true, Retry: retry}, take)
}

// dispatch hands e to the replicas following its key.
func (f *LimitsFeed) dispatch(e jetstream.KeyValueEntry) {
	f.mu.Lock()
	regs := make([]*limitsReg, 0, len(f.regs[e.Key()]))
	for reg := range f.regs[e.Key()] {
		regs = append(regs, reg)
	}
	f.mu.Unlock()
	for _, reg := range regs {
		reg.mu.Lock()
		if reg.live {
			reg.f(e)
		}
		reg.mu.Unlock()
	}
}

// follow hands take every entry of key the feed sees until unregister,
// which waits for a call of take in progress: none after it returns.
func (f *LimitsFeed) follow(key string, take func(jetstream.KeyValueEntry)) (unregister func()) {
	reg := &limitsReg{live: true, f: take}
	f.mu.Lock()
	if f.regs[key] == nil {
		f.regs[key] = map[*limitsReg]struct{}{}
	}
	f.regs[key][reg] = struct{}{}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.regs[key], reg)
		if len(f.regs[key]) == 0 {
			delete(f.regs, key)
		}
		f.mu.Unlock()
		reg.mu.Lock()
		reg.live = false
		reg.mu.Unlock()
	}
}

// Following is how many replicas follow their limits key through the feed
// now.
func (f *LimitsFeed) Following() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, regs := range f.regs {
		n += len(regs)
	}
	return n
}
