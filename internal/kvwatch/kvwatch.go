// Package kvwatch is the one loop that watches a NATS key-value bucket for
// as long as its caller runs: the process's watch of the lease bucket and
// of the fleet's members (pipeline.WatchKV), and the replicas' watch of the
// groups' limits keys (replica's LimitsFeed and a replica's own watch).
package kvwatch

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Options say which entries a watch hands over and when a watch that
// ended is opened again.
type Options struct {
	// Keys are the keys watched (NATS subject wildcards); "" is every key.
	Keys string
	// UpdatesOnly hands only the changes from when a watch opens. Without
	// it, each watch that opens hands nil first (forget what was handed),
	// then the current values, then each change.
	UpdatesOnly bool
	// Retry is the wait before a watch that could not be opened is opened
	// again [1s]; changes in between are not seen.
	Retry time.Duration
	// Reopen is the wait before a watch that closed is opened again (0: at
	// once).
	Reopen time.Duration
}

// Run hands take the entries of kv that o asks for until ctx ends, opening
// the watch again whenever it fails or closes. take is called from Run's
// goroutine, one entry at a time, in the order written.
func Run(ctx context.Context, kv jetstream.KeyValue, o Options, take func(jetstream.KeyValueEntry)) {
	keys, retry := o.Keys, o.Retry
	if keys == "" {
		keys = jetstream.AllKeys
	}
	if retry <= 0 {
		retry = time.Second
	}
	var opts []jetstream.WatchOpt
	if o.UpdatesOnly {
		opts = append(opts, jetstream.UpdatesOnly())
	}
	for ctx.Err() == nil {
		w, err := kv.Watch(ctx, keys, opts...)
		if err != nil {
			wait(ctx, retry)
			continue
		}
		if !o.UpdatesOnly {
			take(nil)
		}
		for open := true; open && ctx.Err() == nil; {
			select {
			case <-ctx.Done():
			case e, ok := <-w.Updates():
				open = ok
				if ok && e != nil { // nil: the current values are all handed
					take(e)
				}
			}
		}
		_ = w.Stop()
		wait(ctx, o.Reopen)
	}
}

// wait waits d or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
