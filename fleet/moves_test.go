package fleet

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestFleetMovesDuringFirstSync: members join while the first member is
// still in the shops' first syncs, so shops move right after (or during)
// their first sync; afterwards each change is published once and nothing
// else (no order.discovered of a snapshot restored without its orders).
func TestFleetMovesDuringFirstSync(t *testing.T) {
	t.Parallel()
	const n = 12
	w := newWorld(t, n)
	ms := []*member{w.start("m0")}
	testnats.WaitForEvery(t, "m0 active on a shop", 60*time.Second, 20*time.Millisecond, func() bool { return len(ms[0].active()) > 0 })
	ms = append(ms, w.start("m1"), w.start("m2")) // m0 gives shops up, some fresh from their first sync

	waitStable(t, ms, n, 90*time.Second)
	changes := w.mutate(0)
	w.waitEvents(changes, 30*time.Second)
	t.Logf("m0 started %.0f pipelines and runs %d shops", gathered(t, ms[0], "orderwatch_fleet_pipeline_starts_total"), len(ms[0].active()))
	for id, cs := range w.callsSince(time.Time{}) {
		tenures(t, id, cs)
	}
}

// gathered is the value of an unlabelled series of a member's registry.
func gathered(t *testing.T, m *member, name string) float64 {
	t.Helper()
	mfs, err := m.f.cfg.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			mt := mf.GetMetric()[0]
			return mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
		}
	}
	return -1
}
