package fleet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/pipeline"
)

// lagging is a wall clock 11 s behind this machine's.
func lagging() time.Time { return time.Now().Add(-11 * time.Second) }

// startClock starts a member whose wall clock is now (its announcements'
// since and at, its leases' since and expires).
func (w *world) startClock(name string, now func() time.Time) *member {
	w.t.Helper()
	return w.startMember(name, map[string]string{"SHOP_PW": "demo"}, now)
}

// TestMemberWithALaggingClock: a member whose wall clock lags 11 s (more
// than the lease TTL, 9 s) keeps its shops: the other member neither sees
// its leases as expired nor starts pipelines for them, and the shares
// stay as they are.
func TestMemberWithALaggingClock(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 4)
	ms := []*member{w.start("m0"), w.startClock("m1", lagging)}
	waitStable(t, ms, 4, 60*time.Second)
	before := starts(t, ms[0].f)
	time.Sleep(12 * time.Second) // longer than the TTL: every lease renewed with a lagging "expires"
	if ok, why := stable(ms, 4); !ok {
		t.Errorf("the fleet is not stable with a member's clock 11 s behind: %s", why)
	}
	if n := starts(t, ms[0].f) - before; n != 0 {
		t.Errorf("m0 started %v pipelines for shops the lagging member holds", n)
	}
	if free := ms[0].f.Report().Counts[StateFree]; free != 0 {
		t.Errorf("m0 sees %d shops free", free)
	}
}

// TestLaterMemberUnderOneNameRefusedWhateverItsClock: of two processes
// under one member name, the one that announced later is refused, judged
// by the members bucket's revisions (the server's order), not by the
// writers' clocks: a later process whose clock lags is still the later
// one (before, the earlier process stopped and the later one ran on).
func TestLaterMemberUnderOneNameRefusedWhateverItsClock(t *testing.T) {
	t.Parallel()
	w := newWorld(t, 2)
	first := w.start("m1")
	waitStable(t, []*member{first}, 2, 60*time.Second)
	second := w.startClock("m1", lagging)
	select {
	case <-second.done:
	case <-first.done:
		t.Fatalf("the earlier member stopped: %v", first.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the later member under the same name still runs after 30 s")
	}
	var ce *pipeline.ConfigError
	if !errors.As(second.err, &ce) || !strings.Contains(second.err.Error(), "two members announce under one name") {
		t.Errorf("the later member's Run: %v, want a configuration error naming the clash", second.err)
	}
}

// starts is the member's orderwatch_fleet_pipeline_starts_total.
func starts(t *testing.T, f *Fleet) float64 {
	t.Helper()
	mfs, err := f.cfg.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "orderwatch_fleet_pipeline_starts_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no orderwatch_fleet_pipeline_starts_total")
	return 0
}
