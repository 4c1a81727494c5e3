package plenty

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMergeSessionsKeepsTheLaterWaitAndEverySession: the merge of two
// login guards keeps the later login wait with its reason and every
// session that may still be open; a shift moves both.
func TestMergeSessionsKeepsTheLaterWaitAndEverySession(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rec := func(r guardRecord) json.RawMessage { b, _ := json.Marshal(r); return b }
	own := rec(guardRecord{NotBefore: now.Add(time.Minute), Reason: "own", Limit: 3, UnsureEnds: []time.Time{now.Add(time.Hour), now.Add(-time.Second)}})
	group := rec(guardRecord{NotBefore: now.Add(time.Hour), Reason: "group's session limit", Kind: "session_limit", UnsureEnds: []time.Time{now.Add(2 * time.Hour)}})
	m, err := MergeSessions(own, group, now)
	if err != nil {
		t.Fatal(err)
	}
	var got guardRecord
	_ = json.Unmarshal(m, &got)
	if !got.NotBefore.Equal(now.Add(time.Hour)) || got.Kind != "session_limit" || got.Limit != 3 || len(got.UnsureEnds) != 2 {
		t.Errorf("merged %+v", got)
	}
	s, err := ShiftSessions(m, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var shifted guardRecord
	_ = json.Unmarshal(s, &shifted)
	if !shifted.NotBefore.Equal(now.Add(time.Hour+5*time.Second)) || !shifted.UnsureEnds[0].Equal(got.UnsureEnds[0].Add(5*time.Second)) {
		t.Errorf("shifted %+v", shifted)
	}
	if _, err := MergeSessions(own, json.RawMessage(`{"not_before":7}`), now); err == nil {
		t.Error("a group's record that does not decode merged without an error")
	}
}

// TestMergeSessionsKeepsEachClientsLatest: a's own record no longer
// counts the session its login opened (the login's outcome is known);
// the group's older copy of a's record still does, beside x's two. The
// merge keeps a's own list (not brought back) and x's sessions, as
// others; a later record of x that closed one replaces the earlier.
func TestMergeSessionsKeepsEachClientsLatest(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	rec := func(r guardRecord) json.RawMessage { b, _ := json.Marshal(r); return b }
	pending := now.Add(time.Hour)
	x := sessionsOf{Ends: []time.Time{now.Add(time.Hour), now.Add(2 * time.Hour)}, SavedAt: now.Add(-time.Minute)}
	own := rec(guardRecord{Owner: "a", Limit: 3, SavedAt: now})
	group := rec(guardRecord{Owner: "a", Limit: 3, UnsureEnds: []time.Time{pending}, SavedAt: now.Add(-time.Second), Others: map[string]sessionsOf{"x": x}})
	m, err := MergeSessions(own, group, now)
	if err != nil {
		t.Fatal(err)
	}
	var got guardRecord
	_ = json.Unmarshal(m, &got)
	if len(got.UnsureEnds) != 0 || len(got.Others["x"].Ends) != 2 || len(got.Others) != 1 {
		t.Errorf("merged %+v: want no own session and x's two", got)
	}
	later := rec(guardRecord{Owner: "x", UnsureEnds: []time.Time{now.Add(2 * time.Hour)}, SavedAt: now})
	m, _ = MergeSessions(m, later, now)
	got = guardRecord{}
	_ = json.Unmarshal(m, &got)
	if len(got.Others["x"].Ends) != 1 {
		t.Errorf("merged with x's later record %+v: want x's one session left", got)
	}
}
