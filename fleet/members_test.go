package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
)

// TestMembersJudgedByArrivalNotTheWritersClock: a member whose clock lags
// (its announcements carry an "at" 30 s in the past) is live as long as
// its announcements arrive; before, the others counted it out (now - at
// beyond twice the TTL) and took its share.
func TestMembersJudgedByArrivalNotTheWritersClock(t *testing.T) {
	w := newWorld(t, 2)
	m0 := w.start("m0")
	waitStable(t, []*member{m0}, 2, 60*time.Second)
	kv, err := w.js.KeyValue(context.Background(), "orderwatch_fleet")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			lag := time.Now().Add(-30 * time.Second).UTC()
			b, _ := json.Marshal(Member{Instance: "lagging", Host: "h", Nonce: "n", Can: []string{}, Since: lag, At: lag})
			_, _ = kv.Put(ctx, "lagging", b)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	testnats.WaitForEvery(t, "m0 counting the lagging member", 30*time.Second, 100*time.Millisecond, func() bool {
		_, ok := m0.f.Report().Members["lagging"]
		return ok
	})
	// It cannot run either shop (it says so): m0 keeps both, and names
	// the difference of registries.
	rep := m0.f.Report()
	if len(m0.active()) != 2 || len(rep.Differs) != 1 || !strings.Contains(rep.Differs[0], "lagging cannot run 2 shops") {
		t.Errorf("m0 runs %v; registries differ: %q", m0.active(), rep.Differs)
	}
}

// TestMembersUnderOneNameRefused: two processes announcing under one
// member name (one WATCHER_INSTANCE_ID, or names that are one key: "m.1"
// and "m_1") would overwrite each other's announcements unnoticed; the
// later one stops with a configuration error naming both, the earlier
// one goes on.
func TestMembersUnderOneNameRefused(t *testing.T) {
	t.Parallel()
	for _, names := range [][2]string{{"m1", "m1"}, {"m.1", "m_1"}} {
		t.Run(names[0]+" and "+names[1], func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, 2)
			first := w.start(names[0])
			waitStable(t, []*member{first}, 2, 60*time.Second)
			second := w.start(names[1])
			select {
			case <-second.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the later member under the same name still runs after 30 s")
			}
			var ce *pipeline.ConfigError
			if !errors.As(second.err, &ce) || !strings.Contains(second.err.Error(), "two members announce under one name") || !strings.Contains(second.err.Error(), "INSTANCE_ID") {
				t.Errorf("the later member's Run: %v, want a configuration error naming the clash", second.err)
			}
			select {
			case <-first.done:
				t.Fatalf("the earlier member stopped too: %v", first.err)
			default:
			}
			if c := first.f.Report().Clash; !strings.Contains(c, "two members announce under one name") {
				t.Errorf("the earlier member's report: clash %q", c)
			}
			waitStable(t, []*member{first}, 2, 30*time.Second)
			// The other gone, the earlier one's report forgets the clash
			// (the counter keeps it).
			testnats.WaitForEvery(t, "the clash over", 30*time.Second, 200*time.Millisecond, func() bool { return first.f.Report().Clash == "" })
		})
	}
}

// TestHoldersJudgedByArrivalNotTheWritersClock: a lease whose holder's
// clock lags (its "expires" already past by this member's clock) is held
// while its renewals arrive; one whose last renewal arrived longer ago
// than the lease TTL is free.
func TestHoldersJudgedByArrivalNotTheWritersClock(t *testing.T) {
	now := time.Now()
	f := &Fleet{cfg: Config{Instance: "m0", MemberTTL: 6 * time.Second, Base: pipeline.Config{Stream: "ORDERS", LeaseTTL: 9 * time.Second}}}
	f.holders = map[string]holder{
		"a.ORDERS": {Value: lease.Value{Instance: "lagging", Expires: now.Add(-30 * time.Second)}, seen: now.Add(-time.Second)},
		"b.ORDERS": {Value: lease.Value{Instance: "gone", Expires: now.Add(time.Hour)}, seen: now.Add(-12 * time.Second)},
	}
	if h := f.holderLocked([2]string{"a.ORDERS", ""}, now); h != "lagging" {
		t.Errorf("a lease renewed a second ago by a lagging clock: holder %q, want lagging", h)
	}
	if h := f.holderLocked([2]string{"b.ORDERS", ""}, now); h != "" {
		t.Errorf("a lease last renewed 12 s ago (TTL 9 s): holder %q, want none", h)
	}
}

// TestShopsOfADepartedMemberContendedAtOnce: when a member's announcement
// is gone (deleted, or expired: the server's marker), the shops whose
// leases it has not renewed for a renewal interval count as free for the
// others at once: they build
// their pipelines (state file, buckets, a standby) while its leases run
// out, and take them when the server expires them, instead of starting
// only then. A holder that announces again holds them again.
func TestShopsOfADepartedMemberContendedAtOnce(t *testing.T) {
	now := time.Now()
	f := &Fleet{cfg: Config{Instance: "m0", MemberTTL: 6 * time.Second, Base: pipeline.Config{Stream: "ORDERS", LeaseTTL: 9 * time.Second}},
		left: map[string]time.Time{}, members: map[string]Member{}}
	f.holders = map[string]holder{
		"a.ORDERS": {Value: lease.Value{Instance: "killed"}, seen: now.Add(-4 * time.Second)},
		"b.ORDERS": {Value: lease.Value{Instance: "late"}, seen: now.Add(-time.Second)},
	}
	if h := f.holderLocked([2]string{"a.ORDERS", ""}, now); h != "killed" {
		t.Fatalf("holder %q, want killed", h)
	}
	f.memberGone(memberKey("killed"), now)
	f.memberGone(memberKey("late"), now)
	if h := f.holderLocked([2]string{"a.ORDERS", ""}, now); h != "" {
		t.Errorf("a lease of a member whose announcement is gone, last renewed 4 s ago: holder %q, want none", h)
	}
	// A member whose announcement is late but whose lease was renewed a
	// second ago still holds it (no pile-up on a loaded member's shops).
	if h := f.holderLocked([2]string{"b.ORDERS", ""}, now); h != "late" {
		t.Errorf("a lease renewed a second ago: holder %q, want late", h)
	}
	f.memberBack(memberKey("killed"))
	if h := f.holderLocked([2]string{"a.ORDERS", ""}, now); h != "killed" {
		t.Errorf("the member announced again: holder %q, want killed", h)
	}
}
