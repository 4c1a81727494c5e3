package plenty

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// memRecords is a record store in memory (JSON, as the state file keeps them).
type memRecords map[string][]byte

func (m memRecords) SaveRecord(name string, v any) error {
	b, err := json.Marshal(v)
	m[name] = b
	return err
}

func (m memRecords) LoadRecord(name string, v any) (bool, error) {
	b, ok := m[name]
	if !ok {
		return false, nil
	}
	return true, json.Unmarshal(b, v)
}

// TestClientKeepsWaitsInRecords: a client given Waits saves the pending
// wait (record "waits") when it starts and when it has passed; a client
// built later on the same records is bound by what is left of it, and the
// report reads the same from the record (PendingWait) without a pacer.
func TestClientKeepsWaitsInRecords(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
	recs := memRecords{}
	c, err := New(Config{BaseURL: "http://shop.example", Username: "u", Password: "p", Now: clk.Now, Waits: recs})
	if err != nil {
		t.Fatal(err)
	}
	c.Pacer().Observe(http.StatusTooManyRequests, spentDay(clk.now, 40*time.Second))
	waits, found, err := LoadWaits(recs)
	if err != nil || !found || len(waits) != 1 || waits[0].Reason != WaitDailyQuota {
		t.Fatalf("record waits %+v, %v, %v", waits, found, err)
	}
	end := waits[0].Until

	clk.now = clk.now.Add(4 * time.Second) // a new process, 4 s later
	c2, err := New(Config{BaseURL: "http://shop.example", Username: "u", Password: "p", Now: clk.Now, Waits: recs})
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := c2.Pacer().Pending(); !ok || !w.Until.Equal(end) {
		t.Errorf("the new client's wait %+v, %v; want until %v", w, ok, end)
	}
	if w, ok := PendingWait(clk.now, waits...); !ok || !w.Until.Equal(end) {
		t.Errorf("PendingWait %+v, %v; want until %v", w, ok, end)
	}
	if _, ok := PendingWait(end.Add(time.Second), waits...); ok {
		t.Error("a wait that has passed is pending")
	}

	recs[WaitsRecord] = []byte(`"not a record"`)
	c3, err := New(Config{BaseURL: "http://shop.example", Username: "u", Password: "p", Now: clk.Now, Waits: recs})
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := c3.Pacer().Pending(); ok {
		t.Errorf("an unreadable record binds the client: %+v", w)
	}
}
