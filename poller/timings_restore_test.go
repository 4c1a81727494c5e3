package poller_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/poller"
)

// A restored timings record is brought into range, whatever it holds (a
// damaged file, a foreign record): settle and overlap within their bounds,
// at most 256 lags each within [0, OverlapCeiling], no negative count or
// pace, and a last step in the future does not stop the shrinking.
func TestTimingsRestoredRecordIsClamped(t *testing.T) {
	future := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	restore := func(t *testing.T, rec map[string]any) *poller.Timings {
		t.Helper()
		store := openStore(t, filepath.Join(t.TempDir(), "state.db"))
		t.Cleanup(func() { store.Close() })
		rec["version"] = 1
		if err := store.SaveRecord(poller.TimingsRecord, rec); err != nil {
			t.Fatal(err)
		}
		return poller.NewTimings(poller.TimingsConfig{Records: store})
	}

	t.Run("absurd values", func(t *testing.T) {
		var lags []map[string]any
		for i := range 300 {
			ms := int64(-1e9)
			if i%2 == 1 {
				ms = 5e18 // twice this overflows
			}
			lags = append(lags, map[string]any{"at": t0.Add(-time.Minute), "ms": ms})
		}
		tm := restore(t, map[string]any{"lags": lags, "settleMs": int64(1e12), "overlapMs": int64(-1e9),
			"changed": t0, "probe": future, "beyondOverlap": -7, "intervalMs": -5})
		in := tm.InForce()
		if in.Settle != poller.SettleCeiling || in.Overlap != poller.OverlapFloor || in.LateArrivals != 256 || in.BeyondOverlap != 0 || in.Interval != 0 {
			t.Errorf("restored: %+v; want settle at its ceiling, overlap at its floor, 256 lags, no negative count or pace", in)
		}
		if !tm.ProbeDue(t0) {
			t.Error("a probe stamped in the future: no probe due")
		}
		tm.Observe(t0, nil, in.Settle, in.Overlap, false)
		if _, overlap := tm.Next(); overlap != poller.OverlapCeiling {
			t.Errorf("after lags of 5e18 ms: overlap %v; want its ceiling %v", overlap, poller.OverlapCeiling)
		}
	})

	t.Run("a last step in the future", func(t *testing.T) {
		tm := restore(t, map[string]any{"settleMs": 20000, "overlapMs": 60000, "changed": future})
		now := t0
		tm.Observe(now, nil, 20*time.Second, time.Minute, false)
		now = now.Add(10 * time.Minute)
		tm.Observe(now, nil, 20*time.Second, time.Minute, false)
		if settle, overlap := tm.Next(); settle != 16*time.Second || overlap != 48*time.Second {
			t.Errorf("10 minutes later without late arrivals: settle %v overlap %v; want one step down (16s, 48s)", settle, overlap)
		}
	})
}
