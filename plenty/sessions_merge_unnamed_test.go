package plenty

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// countedEnds is every end after now of a session a "sessions" record
// counts (its writer's and the others'), sorted.
func countedEnds(t *testing.T, raw json.RawMessage, now time.Time) []time.Time {
	t.Helper()
	var r guardRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("sessions record %s: %v", raw, err)
	}
	var out []time.Time
	for _, end := range r.UnsureEnds {
		if end.After(now) {
			out = append(out, end)
		}
	}
	for _, o := range r.Others {
		for _, end := range o.Ends {
			if end.After(now) {
				out = append(out, end)
			}
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// TestMergeSessionsOfUnnamedRecordsKeepsEveryClients: a record merged
// into none names no client and holds the group's clients as others (x's
// session); merged with another such record (y's session), both clients'
// sessions are kept, whichever is own. An earlier version's record (no
// client named, its writer's session as its own) merged into a record
// that names its client keeps that session too.
func TestMergeSessionsOfUnnamedRecordsKeepsEveryClients(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rec := func(r guardRecord) json.RawMessage { b, _ := json.Marshal(r); return b }
	xEnd, yEnd, oldEnd, aEnd := now.Add(time.Hour), now.Add(2*time.Hour), now.Add(3*time.Hour), now.Add(4*time.Hour)
	fromX, err := MergeSessions(nil, rec(guardRecord{Owner: "x", UnsureEnds: []time.Time{xEnd}, Limit: 3, SavedAt: now}), now)
	if err != nil {
		t.Fatal(err)
	}
	fromY, _ := MergeSessions(nil, rec(guardRecord{Owner: "y", UnsureEnds: []time.Time{yEnd}, Limit: 3, SavedAt: now}), now)
	earlier := rec(guardRecord{UnsureEnds: []time.Time{oldEnd}, Limit: 3, SavedAt: now})
	named := rec(guardRecord{Owner: "a", UnsureEnds: []time.Time{aEnd}, Limit: 3, SavedAt: now})
	for _, c := range []struct {
		name       string
		own, group json.RawMessage
		want       []time.Time
	}{
		{"x's own, y's the group's", fromX, fromY, []time.Time{xEnd, yEnd}},
		{"y's own, x's the group's", fromY, fromX, []time.Time{xEnd, yEnd}},
		{"named own, an earlier version's the group's", named, earlier, []time.Time{oldEnd, aEnd}},
		{"an earlier version's own, named the group's", earlier, named, []time.Time{oldEnd, aEnd}},
	} {
		m, err := MergeSessions(c.own, c.group, now)
		if err != nil {
			t.Fatal(err)
		}
		if got := countedEnds(t, m, now); !slices.EqualFunc(got, c.want, time.Time.Equal) {
			t.Errorf("%s: merged %s counts %v, want %v", c.name, m, got, c.want)
		}
	}
}
