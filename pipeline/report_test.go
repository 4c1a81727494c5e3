package pipeline

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// TestStateReportPaused: the state report (`watcher state`) reads the records of a stopped
// watcher: a pending daily-quota wait reads "paused until T: daily quota
// spent" (as a restarted process would honour it), the budget its level;
// a wait that has passed is not reported, unreadable records are left out.
func TestStateReportPaused(t *testing.T) {
	s, err := state.Open(filepath.Join(t.TempDir(), "state.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	w := plenty.Wait{Until: now.Add(time.Hour), Reason: plenty.WaitDailyQuota, Why: "429 with Retry-After",
		Measured: now.Add(-time.Minute), Announced: time.Hour + time.Minute}
	if err := plenty.SaveWait(s, w); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveRecord(poller.BudgetRecord, poller.BudgetState{Level: 12.5, At: now.Add(-time.Minute), Limit: 4000}); err != nil {
		t.Fatal(err)
	}
	paused, budget := budgetReports(s, now)
	if paused == nil || paused.Reason != "daily_quota" || !paused.Until.Equal(w.Until) ||
		paused.Text != "paused until "+w.Until.UTC().Format(time.RFC3339)+": daily quota spent" {
		t.Errorf("paused %+v", paused)
	}
	if budget == nil || budget.Level != 12.5 || budget.DailyLimit != 4000 {
		t.Errorf("budget %+v", budget)
	}
	var out strings.Builder
	Report{Paused: paused, Budget: budget}.writeBudget(&out, now)
	if !strings.Contains(out.String(), "daily quota spent") || !strings.Contains(out.String(), "call budget") {
		t.Errorf("text report:\n%s", out.String())
	}

	if paused, _ := budgetReports(s, now.Add(2*time.Hour)); paused != nil {
		t.Errorf("a wait that has passed is reported: %+v", paused)
	}
	if err := s.SaveRecord(plenty.WaitsRecord, "not a record"); err != nil {
		t.Fatal(err)
	}
	if paused, _ := budgetReports(s, now); paused != nil {
		t.Errorf("an unreadable record is reported: %+v", paused)
	}
}

func TestFirstSyncProgress(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	back := StartFrom{Back: 100 * time.Hour}
	at := StartFrom{At: base.Add(-10 * time.Hour)}
	for _, tt := range []struct {
		name  string
		st    state.Stats
		start StartFrom
		want  float64
	}{
		{"not started", state.Stats{}, back, 0},
		{"baseline recorded, no slice yet", state.Stats{Baseline: base}, back, 0},
		{"a quarter, start as a duration", state.Stats{Baseline: base, Watermark: base.Add(-75 * time.Hour)}, back, 0.25},
		{"half, start as a time", state.Stats{Baseline: base, Watermark: base.Add(-5 * time.Hour)}, at, 0.5},
		{"watermark before the start", state.Stats{Baseline: base, Watermark: base.Add(-20 * time.Hour)}, at, 0},
		{"done", state.Stats{Baseline: base, Watermark: base.Add(time.Hour), BaselineDone: true}, back, 1},
		{"start after the baseline", state.Stats{Baseline: base, Watermark: base}, StartFrom{At: base.Add(time.Hour)}, 0},
	} {
		if got := firstSyncProgress(tt.st, tt.start); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStateReportRole: the text report names the replica's role in its
// group and the holder of the lease, and says so when it has no lease.
func TestStateReportRole(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		lease *replica.Report
		want  string
	}{
		{&replica.Report{Role: "active", Instance: "a", Holder: "a", HolderAt: "pod-0"}, "role           active (this replica: a), holder a (host pod-0)\n"},
		{&replica.Report{Role: "standby", Instance: "b", Holder: "a", Unproven: "the stream was created again"}, "role           standby (this replica: b), holder a\n  unproven snapshot: the stream was created again\n"},
		{&replica.Report{Role: "starting", Instance: "b"}, "role           starting (this replica: b), holder none\n"},
		{nil, "role           no lease"},
	} {
		var out strings.Builder
		Report{Lease: tt.lease}.WriteText(&out, now)
		if !strings.Contains(out.String(), tt.want) {
			t.Errorf("text report lacks %q:\n%s", tt.want, out.String())
		}
	}
}
