package poller

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// TestLegacyCheckedMigrates: a state file of an earlier version holds the
// second look's position in the budget's record, in the service's time.
// With the service's clock 10 minutes ahead of the local one it is kept
// (the ledger checks it against the watermark and the stamp evidence,
// never the local clock): what lies above it is owed at the overlap's age,
// what lies below was read at it; a position beyond the evidence (a
// damaged record) owes the overlap and 60 s more below the watermark.
func TestLegacyCheckedMigrates(t *testing.T) {
	local := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	wm := local.Add(10 * time.Minute) // the service's clock is 10 minutes ahead
	for _, tc := range []struct {
		name    string
		checked time.Time
		owed    time.Time // the first stamp owed at the overlap's age
	}{
		{"behind the watermark, ahead of the local clock", wm.Add(-2 * time.Minute), wm.Add(-2 * time.Minute)},
		{"none", time.Time{}, wm.Add(-10*time.Second - 2*secondLookMax)},
		{"beyond the evidence", wm.Add(time.Hour), wm.Add(-10*time.Second - 2*secondLookMax)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := state.Open(filepath.Join(t.TempDir(), "state.db"), state.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Commit(state.Commit{Watermark: &wm, BaselineDone: true}); err != nil {
				t.Fatal(err)
			}
			meta, err := st.Meta()
			if err != nil {
				t.Fatal(err)
			}
			p := &Poller{cfg: Config{Overlap: 10 * time.Second, StartFrom: local.Add(-24 * time.Hour), Now: func() time.Time { return local }},
				store: st, log: slog.New(slog.DiscardHandler), legacyChecked: tc.checked, probeLevel: probeLate}
			p.loadReads(meta)
			if !p.readsLoaded {
				t.Fatal("the ledger was not loaded")
			}
			from, _, ok := p.reads.owed(10*time.Second, sec(wm))
			if !ok || !from.Equal(sec(tc.owed)) {
				t.Errorf("owed at the overlap's age from %v (%v); want %v (ledger %+v)", from, ok, sec(tc.owed), p.reads)
			}
			if pf, _, ok := p.reads.owed(probeLate, sec(wm)); !ok || !pf.Before(sec(tc.owed)) {
				t.Errorf("owed at the probes' age from %v (%v); want below %v: a probe's first window", pf, ok, sec(tc.owed))
			}
		})
	}
}
