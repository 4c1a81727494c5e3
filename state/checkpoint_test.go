package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestCheckpointRestore(t *testing.T) {
	active := openT(t, tempPath(t), Options{})
	wm := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	if err := active.SetBaseline(wm.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := active.Commit(Commit{States: puts(1, 3), Events: events(1, "a"), Watermark: &wm, BaselineDone: true,
		Records: []Record{{Name: "budget", Value: map[string]int{"level": 7}}, {Name: "replica", Value: "active's own"}}}); err != nil {
		t.Fatal(err)
	}
	if _, quiet, err := active.Checkpoint(); err != nil || quiet {
		t.Fatalf("Checkpoint with an event in the outbox: quiet %v, err %v; want not quiet", quiet, err)
	}
	if err := active.DeleteOutbox(1); err != nil {
		t.Fatal(err)
	}
	c, quiet, err := active.Checkpoint()
	if err != nil || !quiet {
		t.Fatalf("Checkpoint: quiet %v, err %v", quiet, err)
	}
	// Through JSON, as the checkpoint travels.
	b, _ := json.Marshal(c)
	var got Checkpoint
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}

	standby := openT(t, tempPath(t), Options{})
	if err := standby.SaveRecord("replica", "standby's own"); err != nil {
		t.Fatal(err)
	}
	if err := standby.SaveRecord("clock", "stale evidence"); err != nil {
		t.Fatal(err)
	}
	own := func(name string) bool { return name == "replica" }
	if err := standby.RestoreCheckpoint(got, own); err != nil {
		t.Fatal(err)
	}
	m, err := standby.Meta()
	if err != nil || !m.Watermark.Equal(wm) || !m.Baseline.Equal(wm.Add(-time.Hour)) || !m.BaselineDone {
		t.Errorf("meta after restore %+v (%v)", m, err)
	}
	recs, _ := standby.Records()
	if string(recs["budget"]) != `{"level":7}` || string(recs["replica"]) != `"standby's own"` || recs["clock"] != nil {
		t.Errorf("records after restore: %s", recs)
	}
	// A watermark moves back when the checkpoint says so.
	got.Watermark = wm.Add(-time.Minute)
	if err := standby.RestoreCheckpoint(got, own); err != nil {
		t.Fatal(err)
	}
	if m, _ := standby.Meta(); !m.Watermark.Equal(wm.Add(-time.Minute)) {
		t.Errorf("watermark %v, want the checkpoint's", m.Watermark)
	}
}

func TestApplyMirroredNeverMovesBack(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	old, cur := typical(1), typical(1)
	cur.UpdatedAt.Time = old.UpdatedAt.Add(time.Minute)
	cur.StatusID = typical(2).StatusID
	if err := s.ApplyMirrored([]Mirrored{{1, old}, {1, cur}, {1, old}}, Record{Name: "replica", Value: 3}); err != nil {
		t.Fatal(err)
	}
	if st := lookup(t, s, 1)[0]; st == nil || !st.Same(cur) {
		t.Errorf("order 1 = %+v, want the newer state", st)
	}
	var seq int
	if found, _ := s.LoadRecord("replica", &seq); !found || seq != 3 {
		t.Errorf("record written with the batch: %v %d", found, seq)
	}
}

func TestRevertOutbox(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	s5, s6, s7 := typical(3), typical(3), typical(3)
	s6.StatusID, s6.UpdatedAt.Time = typical(4).StatusID, s5.UpdatedAt.Add(time.Second)
	s7.StatusID, s7.UpdatedAt.Time = typical(5).StatusID, s5.UpdatedAt.Add(2*time.Second)
	if err := s.Commit(Commit{States: []Put{{1, s5}}}); err != nil {
		t.Fatal(err)
	}
	undo := map[string]Undo{"e1": {1, &s5, s6}, "e2": {1, &s6, s7}, "e3": {2, nil, s5}, "e4": {3, &s5, s6}}
	for _, c := range []Commit{
		{States: []Put{{1, s6}, {2, s5}}, Events: []OutboxEntry{{ID: "e1"}, {ID: "e3"}}},
		{States: []Put{{1, s7}}, Events: []OutboxEntry{{ID: "e2"}}},
		{States: []Put{{3, s7}}, Events: []OutboxEntry{{ID: "e4"}, {ID: "bad"}}}, // 3 moved on since e4: kept
	} {
		if err := s.Commit(c); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.RevertOutbox(func(e OutboxEntry) (Undo, error) {
		u, ok := undo[e.ID]
		if !ok {
			return Undo{}, errors.New("unreadable")
		}
		return u, nil
	})
	if err != nil || n != 3 || s.OutboxDepth() != 0 {
		t.Fatalf("RevertOutbox: %d reverted, depth %d, err %v; want 3, 0", n, s.OutboxDepth(), err)
	}
	got := lookup(t, s, 1, 2, 3)
	if got[0] == nil || !got[0].Same(s5) || got[1] != nil || got[2] == nil || !got[2].Same(s7) {
		t.Errorf("after the revert: %+v %+v %+v", got[0], got[1], got[2])
	}
	if rest, _ := s.Outbox(0, 0); len(rest) != 0 {
		t.Errorf("%d entries left", len(rest))
	}
}

func TestDumpLoadOrders(t *testing.T) {
	a := openT(t, tempPath(t), Options{})
	if err := a.Commit(Commit{States: puts(1, 500), Events: events(1, "x")}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := a.DumpOrders(&buf); !errors.Is(err, ErrNotQuiet) || buf.Len() != 0 {
		t.Fatalf("DumpOrders with an outbox: %v, %d bytes", err, buf.Len())
	}
	_ = a.DeleteOutbox(1)
	n, err := a.DumpOrders(&buf)
	if err != nil || n != 500 {
		t.Fatalf("DumpOrders: %d, %v", n, err)
	}
	b := openT(t, tempPath(t), Options{})
	if err := b.Commit(Commit{States: puts(900, 901)}); err != nil {
		t.Fatal(err)
	}
	if n, err := b.LoadOrders(bytes.NewReader(buf.Bytes()), Record{Name: "replica", Value: 1}); err != nil || n != 500 {
		t.Fatalf("LoadOrders: %d, %v", n, err)
	}
	st, _ := b.Stats()
	got := lookup(t, b, 1, 250, 500, 900)
	if st.Orders != 500 || got[3] != nil {
		t.Errorf("%d orders after the load, order 900 %v; want the dump's 500 only", st.Orders, got[3])
	}
	for i, id := range []int64{1, 250, 500} {
		if got[i] == nil || !got[i].Same(typical(id)) {
			t.Errorf("order %d = %+v", id, got[i])
		}
	}
	bad := append([]byte(nil), buf.Bytes()[:buf.Len()-3]...)
	if _, err := b.LoadOrders(bytes.NewReader(bad)); err == nil {
		t.Error("a cut dump loaded")
	}
	if st, _ := b.Stats(); st.Orders != 500 {
		t.Errorf("a failed load changed the snapshot: %d orders", st.Orders)
	}
}

// The quarantine travels with the checkpoint (the active's watermark has
// passed those orders), and a replica's own records stay its own.
func TestCheckpointCarriesQuarantine(t *testing.T) {
	active := openT(t, tempPath(t), Options{})
	standby := openT(t, tempPath(t), Options{})
	wm := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	q := Quarantined{Reason: "statusId: an object", Excerpt: `{"id":7,"statusId":{}}`, FirstSeen: wm, LastSeen: wm, Attempts: 1}
	if err := active.Commit(Commit{Watermark: &wm, Quarantine: []QuarantineOp{{OrderID: 7, Entry: &q}},
		Records: []Record{{Name: "publisher", Value: map[string]int{"sent_through": 900}}}}); err != nil {
		t.Fatal(err)
	}
	// The standby held an order of an old tenure in quarantine, since released.
	if err := standby.Commit(Commit{Quarantine: []QuarantineOp{{OrderID: 3, Entry: &q}},
		Records: []Record{{Name: "publisher", Value: map[string]int{"sent_through": 12}}}}); err != nil {
		t.Fatal(err)
	}
	c, _, err := active.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.RestoreCheckpoint(c, func(name string) bool { return name == "publisher" }); err != nil {
		t.Fatal(err)
	}
	got, err := standby.Quarantine()
	if err != nil || len(got) != 1 || got[0].OrderID != 7 || got[0].Reason != q.Reason {
		t.Errorf("standby quarantine after restore = %+v, %v; want order 7 only", got, err)
	}
	var mark map[string]int
	if found, err := standby.LoadRecord("publisher", &mark); err != nil || !found || mark["sent_through"] != 12 {
		t.Errorf("standby's own publisher record = %v, %v, %v; want its own 12", mark, found, err)
	}
}

// A checkpoint fits in one NATS message (1 MB by default) however many
// orders are quarantined: 2,000, each with the excerpt and reason a sweep
// notes, travel as 200 records and 1,800 ids, and the replica that
// restores it holds all 2,000 in quarantine (the ids due for a retry at
// once).
func TestCheckpointQuarantineFitsOneMessage(t *testing.T) {
	active := openT(t, tempPath(t), Options{NoSync: true})
	standby := openT(t, tempPath(t), Options{NoSync: true})
	wm := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	const n = 2000
	ops := make([]QuarantineOp, n)
	for i := range ops {
		id := int64(100000 + i)
		raw := fmt.Sprintf(`{"id":%d,"referrerId":1,"roundTotalsOnly":true,"numberOfDecimals":2,"plentyId":41523,"typeId":1,"lockStatus":"unlocked","locationId":"1","createdAt":"2026-11-22T09:09:10+01:00","updatedAt":"2026-11-22T10:01:00+01:00","statusId":{"id":"unreadable","note":"a status object where a number belongs"},"ownerId":"3"}`, id)
		ops[i] = QuarantineOp{OrderID: id, Entry: &Quarantined{
			Reason:  `not a decimal number: "{\"id\":\"unreadable\",\"note\":\"a status object where a number belongs\"}"`,
			Excerpt: raw[:min(len(raw), 300)] + "...", UpdatedAt: "2026-11-22T10:01:00+01:00",
			FirstSeen: wm, LastSeen: wm, Attempts: 3,
		}}
	}
	if err := active.Commit(Commit{Watermark: &wm, Quarantine: ops}); err != nil {
		t.Fatal(err)
	}
	c, _, err := active.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checkpoint of %d quarantined orders: %d bytes", n, len(b))
	if len(b) > 512<<10 {
		t.Errorf("checkpoint of %d quarantined orders: %d bytes, want at most 512 KiB (NATS' default payload is 1 MB)", n, len(b))
	}
	var back Checkpoint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := standby.RestoreCheckpoint(back, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	got, err := standby.Quarantine()
	if err != nil || len(got) != n {
		t.Fatalf("standby quarantine after restore: %d orders, %v; want %d", len(got), err, n)
	}
	for i, q := range got {
		if q.OrderID != int64(100000+i) || q.Reason == "" {
			t.Fatalf("restored quarantine record %d: %+v", i, q)
		}
	}
}

// A checkpoint whose quarantine names an id that is no order's (zero or
// negative: a damaged value) is restored without it, not refused: a
// takeover must not fail on it.
func TestCheckpointRestoreSkipsBadQuarantineIDs(t *testing.T) {
	s := openT(t, tempPath(t), Options{NoSync: true})
	c := Checkpoint{Quarantine: []Quarantined{{OrderID: -1, Reason: "x"}, {OrderID: 4, Reason: "y"}}, QuarantineIDs: []int64{0, -3, 5}}
	if err := s.RestoreCheckpoint(c, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Quarantine()
	if err != nil || len(got) != 2 || got[0].OrderID != 4 || got[1].OrderID != 5 {
		t.Fatalf("quarantine after restore = %+v, %v; want orders 4 and 5", got, err)
	}
}

// TestRestoreWithMerge: a restore asks Merge about every record that is
// not the file's own, of the checkpoint and of the file alike, with the
// file's records as they were: what it handles is stored as it says (a
// record only the file knows kept, merged with the checkpoint's), the
// rest is the checkpoint's.
func TestRestoreWithMerge(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	for name, v := range map[string]string{"own": "mine", "waits": "file's wait", "unsent": "file's wait", "clock": "stale", "gone": "file only"} {
		if err := s.SaveRecord(name, v); err != nil {
			t.Fatal(err)
		}
	}
	c := Checkpoint{Records: map[string]json.RawMessage{"own": []byte(`"theirs"`), "waits": []byte(`"group's wait"`), "clock": []byte(`"fresh"`), "new": []byte(`"group's"`)}}
	asked := map[string]string{}
	err := s.RestoreWith(c, Restore{
		Own: func(name string) bool { return name == "own" || name == "unsent" },
		Merge: func(name string, ckpt json.RawMessage, file func(string) json.RawMessage) (json.RawMessage, bool) {
			asked[name] = string(ckpt)
			switch name {
			case "waits":
				var a, b string
				_ = json.Unmarshal(file("unsent"), &a)
				_ = json.Unmarshal(ckpt, &b)
				m, _ := json.Marshal(a + " + " + b)
				return m, true
			case "gone":
				return nil, true
			}
			return nil, false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"waits": `"group's wait"`, "clock": `"fresh"`, "new": `"group's"`, "gone": ""}
	for name, ckpt := range want {
		if got, ok := asked[name]; !ok || got != ckpt {
			t.Errorf("Merge asked about %q with the checkpoint's %q (asked: %v), want %q", name, got, ok, ckpt)
		}
	}
	if _, ok := asked["own"]; ok {
		t.Error("Merge was asked about an own record")
	}
	recs, _ := s.Records()
	wantRecs := map[string]string{"own": `"mine"`, "unsent": `"file's wait"`, "waits": `"file's wait + group's wait"`, "clock": `"fresh"`, "new": `"group's"`}
	for name, v := range wantRecs {
		if string(recs[name]) != v {
			t.Errorf("record %q after the restore: %s, want %s", name, recs[name], v)
		}
	}
	if len(recs) != len(wantRecs) {
		t.Errorf("records after the restore: %s, want only %v", recs, wantRecs)
	}
}
