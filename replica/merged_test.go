package replica_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
)

// groupRecord is the group's copy of one record of its limits.
func (g *group) groupRecord(t *testing.T, name string) json.RawMessage {
	t.Helper()
	var v struct {
		Writer  lease.Writer               `json:"writer"`
		Records map[string]json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal([]byte(g.limits()), &v); err != nil {
		t.Fatalf("the group's limits: %v", err)
	}
	return v.Records[name]
}

// putLimits writes the group's limits as the replica writer writes them.
func (g *group) putLimits(t *testing.T, writer string, recs map[string]any) {
	t.Helper()
	raw := map[string]json.RawMessage{}
	for name, r := range recs {
		raw[name], _ = json.Marshal(r)
	}
	v, _ := json.Marshal(map[string]any{"writer": lease.Writer{Instance: writer, Nonce: writer}, "written": time.Now().UTC(), "records": raw})
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), g.key+".limits", v); err != nil {
		t.Fatal(err)
	}
}

// TestActivesSavesKeepWhatOthersMerged: another replica (one past its
// deadline, say) merges what it learned into the group's limits during
// a's tenure: a 429's wait, a session it opened, calls it spent. The
// active's running components, which knew none of it, save their own
// records twice: the group's limits keep all three (a save by the
// group's last writer merges too).
func TestActivesSavesKeepWhatOthersMerged(t *testing.T) {
	g := newGroup(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	recs := a.rep.Records(a.store)
	now := time.Now()
	own := map[string]any{
		"level": 1000.0, "at": now, "limit": 166000,
		"spent": map[string]any{"a-budget": map[string]any{"calls": 10, "at": now}},
	}
	if err := recs.SaveRecord(poller.BudgetRecord, own); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's limits in the group", func() bool { return strings.Contains(g.limits(), `"instance":"a"`) })

	// x's write: its own merged over a's (a's spend and x's 100 calls).
	sessionEnd := now.Add(time.Hour).UTC()
	g.putLimits(t, "x", map[string]any{
		plenty.WaitsRecord:    map[string]any{"waits": []plenty.Wait{{Until: now.Add(time.Minute), Reason: plenty.WaitThrottled, Why: "429 answered to x", Measured: now, Announced: time.Minute}}},
		plenty.SessionsRecord: map[string]any{"owner": "x-client", "unsure_ends": []time.Time{sessionEnd}, "limit": 3, "saved_at": now},
		poller.BudgetRecord: map[string]any{
			"level": 900.0, "at": now, "limit": 166000,
			"spent": map[string]any{"a-budget": map[string]any{"calls": 10, "at": now}, "x-budget": map[string]any{"calls": 100, "at": now}},
		},
	})

	// a's components, which never heard of x's records, save theirs.
	for range 2 {
		if err := plenty.SaveWait(recs, plenty.Wait{}); err != nil {
			t.Fatal(err)
		}
		if err := recs.SaveRecord(plenty.SessionsRecord, map[string]any{"owner": "a-client", "limit": 3, "saved_at": time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := recs.SaveRecord(poller.BudgetRecord, own); err != nil {
			t.Fatal(err)
		}
	}
	if w := g.groupRecord(t, plenty.WaitsRecord); !strings.Contains(string(w), "429 answered to x") {
		t.Errorf("x's wait is lost from the group's limits: %s", w)
	}
	if s := g.groupRecord(t, plenty.SessionsRecord); !strings.Contains(string(s), sessionEnd.Format("2006-01-02T15:04:05")) {
		t.Errorf("x's session is lost from the group's limits: %s", s)
	}
	var b poller.BudgetState
	if err := json.Unmarshal(g.groupRecord(t, poller.BudgetRecord), &b); err != nil || b.Level > 900 {
		t.Errorf("the group's budget is at %.0f (%v): x's 100 calls refunded (want at most 900)", b.Level, err)
	}
}

// TestActivesSavesDoNotMultiplyItsWait: the active's saves merge the
// group's copy of its own wait back into its records: the copy is on its
// own clock (no shift), so the group holds the one wait, however often
// it saves.
func TestActivesSavesDoNotMultiplyItsWait(t *testing.T) {
	g := newGroup(t)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	recs := a.rep.Records(a.store)
	w := plenty.Wait{Until: time.Now().Add(time.Minute), Reason: plenty.WaitThrottled, Why: "429", Measured: time.Now(), Announced: time.Minute}
	for range 5 {
		if err := plenty.SaveWait(recs, w); err != nil {
			t.Fatal(err)
		}
	}
	var r struct {
		Waits []plenty.Wait `json:"waits"`
	}
	if err := json.Unmarshal(g.groupRecord(t, plenty.WaitsRecord), &r); err != nil || len(r.Waits) != 1 {
		t.Errorf("the group holds %d waits (%v), want a's one", len(r.Waits), err)
	}
}
