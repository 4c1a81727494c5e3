package plenty

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMergeSessionsTakesAShiftedUnnamedSessionOnce: a and b (each naming
// its client) hold an earlier version's session as unnamed, and pass the
// group's record back and forth, each read moved onto the reader's clock
// by a bound of the clocks' difference (a few milliseconds off each
// time, as replica.shiftFrom): after 20 hand-overs the group still counts
// that one session (and no end earlier than it had).
func TestMergeSessionsTakesAShiftedUnnamedSessionOnce(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	end := now.Add(6 * time.Hour)
	rec := func(r guardRecord) json.RawMessage { b, _ := json.Marshal(r); return b }
	a := rec(guardRecord{Owner: "a", Limit: 3, SavedAt: now, Others: map[string]sessionsOf{unnamedClient: {Ends: []time.Time{end}, SavedAt: now}}})
	b := rec(guardRecord{Owner: "b", Limit: 3, SavedAt: now})
	own := []json.RawMessage{a, b}
	group := a
	for i := range 20 {
		now = now.Add(time.Minute)
		reader := (i + 1) % 2
		d := time.Duration(3+i%4) * time.Millisecond // a's clock read onto b's and back: never the same bound twice
		if reader == 0 {
			d = -d + time.Millisecond
		}
		shifted, err := ShiftSessions(group, d)
		if err != nil {
			t.Fatal(err)
		}
		m, err := MergeSessions(own[reader], shifted, now)
		if err != nil {
			t.Fatal(err)
		}
		own[reader], group = m, m
		got := countedEnds(t, m, now)
		if len(got) != 1 || got[0].Before(end) {
			t.Fatalf("hand-over %d: the group's record %s counts %v, want the one session ending at %v or later", i+1, m, got, end)
		}
	}
}

// TestMergeSessionsCountsAnAdoptedUnnamedSessionOnce: x ran an earlier
// version and saved its session without naming itself; the group keeps it
// as unnamed. x starts again in this version: its client takes the
// session of its own record as its own (loadGuard) and names itself (x2).
// Merged, the group counts that session once (not once as x2's and once
// as unnamed). (Once x2 knows it closed, a copy another replica's client
// kept as unnamed still counts it until its end: no client closes those.)
func TestMergeSessionsCountsAnAdoptedUnnamedSessionOnce(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	end := now.Add(6 * time.Hour)
	rec := func(r guardRecord) json.RawMessage { b, _ := json.Marshal(r); return b }
	group := rec(guardRecord{Owner: "y", Limit: 3, SavedAt: now, Others: map[string]sessionsOf{unnamedClient: {Ends: []time.Time{end.Add(3 * time.Millisecond)}, SavedAt: now}}})
	x2 := rec(guardRecord{Owner: "x2", UnsureEnds: []time.Time{end}, Limit: 3, SavedAt: now.Add(time.Minute)})
	m, err := MergeSessions(x2, group, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := countedEnds(t, m, now); len(got) != 1 {
		t.Errorf("x2's own record merged with the group's %s counts %v, want the one session", m, got)
	}
}
