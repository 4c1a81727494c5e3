package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
)

// timeline follows the lease bucket from the test process (the server's
// view, no member's): every change of a key with its time and the member
// that wrote it. Only the lease bucket: the takeover's steps are there.
// (A member watches the checkpoint bucket's limits once per process, since
// replica.LimitsFeed; before, one watch per active shop reached the server's
// 1,000 consumers per stream at 1,000 shops and a watch more was refused.)
type timeline struct {
	mu   sync.Mutex
	keys map[string][]mark // by key
	stop []func()
}

type mark struct {
	at       time.Time
	put      bool
	instance string // the writer
}

// followTakeovers starts following the lease bucket of the world's fleet
// (base: bucket "orderwatch"); a watch that cannot be made yet is tried
// again.
func followTakeovers(t *testing.T, w *world) *timeline {
	t.Helper()
	tl := &timeline{keys: map[string][]mark{}}
	t.Cleanup(tl.close)
	ctx := context.Background()
	var kw jetstream.KeyWatcher
	testnats.WaitForEvery(t, "a watch of the lease bucket", time.Minute, time.Second, func() bool {
		kv, err := w.js.KeyValue(ctx, "orderwatch_lease")
		if err == nil {
			kw, err = kv.WatchAll(ctx, jetstream.UpdatesOnly())
		}
		return err == nil
	})
	tl.stop = append(tl.stop, func() { _ = kw.Stop() })
	go func() {
		for e := range kw.Updates() {
			if e != nil {
				tl.note(e)
			}
		}
	}()
	return tl
}

func (tl *timeline) close() {
	for _, f := range tl.stop {
		f()
	}
}

func (tl *timeline) note(e jetstream.KeyValueEntry) {
	m := mark{at: time.Now(), put: e.Operation() == jetstream.KeyValuePut}
	var v lease.Value
	if m.put && json.Unmarshal(e.Value(), &v) == nil {
		m.instance = v.Instance
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.keys[e.Key()] = append(tl.keys[e.Key()], m)
}

// takeover is, for one key, when the victim's lease was gone after the
// kill (deleted or the expiry marker) and when another member wrote it
// (acquired); zero when not seen.
func (tl *timeline) takeover(key, victim string, killed time.Time) (gone, acquired time.Time) {
	for _, m := range tl.keys[key] {
		switch {
		case m.at.Before(killed):
		case !m.put && gone.IsZero():
			gone = m.at
		case m.put && m.instance != victim && acquired.IsZero():
			acquired = m.at
		}
	}
	return gone, acquired
}

// report says, for the shops moved, the time from the kill to their
// lease's expiry, from it to the acquisition by another member, and from
// there to the first call (first).
func (tl *timeline) report(moved []string, stream, victim string, killed time.Time, first map[string]time.Time) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var gone, take, call []time.Duration
	for _, id := range moved {
		g, a := tl.takeover(lease.Key(id, stream), victim, killed)
		f := first[id]
		if !g.IsZero() {
			gone = append(gone, g.Sub(killed))
		}
		if !g.IsZero() && !a.IsZero() {
			take = append(take, a.Sub(g))
		}
		if !a.IsZero() && !f.IsZero() {
			call = append(call, f.Sub(a))
		}
	}
	var out []string
	for _, p := range []struct {
		name string
		d    []time.Duration
	}{{"kill to lease gone", gone}, {"gone to acquired elsewhere", take}, {"acquired to first call", call}} {
		slices.Sort(p.d)
		if len(p.d) == 0 {
			out = append(out, p.name+": none")
			continue
		}
		out = append(out, fmt.Sprintf("%s p50 %v p99 %v max %v (%d)", p.name, pct(p.d, 50), pct(p.d, 99), p.d[len(p.d)-1].Round(time.Millisecond), len(p.d)))
	}
	return strings.Join(out, "; ")
}

// renewals says how far apart the server received consecutive writes of
// each lease key by one member between from and to, leaving out the
// member skip (a renewal every TTL/3 = 3 s; a holder stops at its
// deadline, TTL minus a fifth = 7.2 s after it sent the last answered
// one): p50, p99, max, and how many gaps exceeded 5 s.
func (tl *timeline) renewals(from, to time.Time, skip string) string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var gaps []time.Duration
	over := 0
	for _, ms := range tl.keys {
		for i := 1; i < len(ms); i++ {
			a, b := ms[i-1], ms[i]
			if a.at.Before(from) || b.at.After(to) || !a.put || !b.put || a.instance != b.instance || a.instance == skip {
				continue
			}
			g := b.at.Sub(a.at)
			gaps = append(gaps, g)
			if g > 5*time.Second {
				over++
			}
		}
	}
	if len(gaps) == 0 {
		return "no renewal seen"
	}
	slices.Sort(gaps)
	return fmt.Sprintf("received apart p50 %v, p99 %v, max %v (%d renewals; %d more than 5 s apart)", pct(gaps, 50), pct(gaps, 99), gaps[len(gaps)-1].Round(time.Millisecond), len(gaps), over)
}
