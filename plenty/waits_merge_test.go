package plenty

import (
	"encoding/json"
	"testing"
	"time"
)

func waitsJSON(t *testing.T, ws ...Wait) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(waitsRecord{Waits: ws})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMergeWaitsOnlyLengthens: the merge of two records keeps every wait
// with time left, so the pending wait is the longer of the two; a group's
// record that does not decode is an error (the caller keeps its own).
func TestMergeWaitsOnlyLengthens(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	short := Wait{Until: now.Add(time.Minute), Measured: now, Announced: time.Minute, Reason: WaitThrottled}
	long := Wait{Until: now.Add(time.Hour), Measured: now, Announced: time.Hour, Reason: WaitDailyQuota}
	over := Wait{Until: now.Add(-time.Second), Measured: now.Add(-time.Minute), Announced: 59 * time.Second}
	for _, c := range []struct {
		name       string
		own, group json.RawMessage
		want       time.Time // the pending wait's end; zero: none
	}{
		{"group's longer", waitsJSON(t, short), waitsJSON(t, long), long.Until},
		{"own longer", waitsJSON(t, long), waitsJSON(t, short), long.Until},
		{"no own record", nil, waitsJSON(t, short), short.Until},
		{"own does not decode", json.RawMessage(`{"waits":7}`), waitsJSON(t, short), short.Until},
		{"ended ones dropped", waitsJSON(t, over), waitsJSON(t, over), time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := MergeWaits(c.own, c.group, now)
			if err != nil {
				t.Fatal(err)
			}
			var r waitsRecord
			if err := json.Unmarshal(m, &r); err != nil {
				t.Fatal(err)
			}
			w, _ := PendingWait(now, r.Waits...)
			if !w.Until.Equal(c.want) {
				t.Errorf("pending wait until %v, want %v (%s)", w.Until, c.want, m)
			}
		})
	}
	if _, err := MergeWaits(waitsJSON(t, long), json.RawMessage(`{"waits":"not a list"}`), now); err == nil {
		t.Error("a group's record that does not decode merged without an error")
	}
}

// TestShiftWaitsMovesLocalTimesOnly: a shift moves the local-clock times,
// not the service's.
func TestShiftWaitsMovesLocalTimesOnly(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w := Wait{Until: now.Add(time.Minute), Measured: now, Announced: time.Minute, Reset: now.Add(time.Hour), ServerAt: now}
	m, err := ShiftWaits(waitsJSON(t, w), 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r waitsRecord
	_ = json.Unmarshal(m, &r)
	got := r.Waits[0]
	if !got.Until.Equal(w.Until.Add(4*time.Second)) || !got.Measured.Equal(now.Add(4*time.Second)) || !got.Reset.Equal(w.Reset) || !got.ServerAt.Equal(now) {
		t.Errorf("shifted %+v", got)
	}
}
