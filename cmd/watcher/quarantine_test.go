package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/state"
)

// TestStateReportListsQuarantine: the state report lists the quarantined
// orders with the raw reason, and an order's report shows its quarantine
// record, also for an order never read decodable (no tracked state).
func TestStateReportListsQuarantine(t *testing.T) {
	s, err := state.Open(filepath.Join(t.TempDir(), "state.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	reason := "json: cannot unmarshal object into Go struct field wireOrder.statusId"
	err = s.Commit(state.Commit{Quarantine: []state.QuarantineOp{{OrderID: 4711, Entry: &state.Quarantined{
		Reason: reason, Excerpt: `{"id":4711,"statusId":{}}`, UpdatedAt: "2026-11-25T10:59:00+01:00", FirstSeen: at, LastSeen: at, Attempts: 3,
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := pipeline.NewReport(s, StartFrom{Back: time.Hour})
	if err != nil || len(rep.Quarantine) != 1 || rep.Quarantine[0].OrderID != 4711 || rep.Quarantine[0].Reason != reason {
		t.Fatalf("report %+v, %v", rep.Quarantine, err)
	}
	var text bytes.Buffer
	rep.WriteText(&text, at.Add(time.Minute))
	if !strings.Contains(text.String(), "quarantined    1") || !strings.Contains(text.String(), "order 4711: "+reason) {
		t.Errorf("text report:\n%s", text.String())
	}
	b, err := localState(s, &Config{StatePath: s.Path()}, pipeline.StateQuery{OrderID: 4711})
	if err != nil {
		t.Fatal(err)
	}
	var o pipeline.OrderReport
	if err := json.Unmarshal(b, &o); err != nil || o.State != nil || o.Quarantine == nil || o.Quarantine.Attempts != 3 {
		t.Errorf("order report %s: %v", b, err)
	}
	if _, err := localState(s, &Config{StatePath: s.Path()}, pipeline.StateQuery{OrderID: 4712}); err == nil {
		t.Error("an order neither tracked nor quarantined was found")
	}
	// No quarantine: an empty list, not null.
	if err := s.Commit(state.Commit{Quarantine: []state.QuarantineOp{{OrderID: 4711}}}); err != nil {
		t.Fatal(err)
	}
	b, _ = localState(s, &Config{StatePath: s.Path()}, pipeline.StateQuery{})
	if !strings.Contains(string(b), `"quarantine": []`) {
		t.Errorf("report without quarantine:\n%s", b)
	}
}
