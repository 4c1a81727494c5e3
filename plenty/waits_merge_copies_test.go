package plenty

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMergeWaitsTakesAShiftedCopyOnce: the group's copy of a wait is the
// same answer moved onto another replica's clock (its local times a few
// milliseconds later). Merged with the wait as first saved, it is one
// wait, the copy that binds longer: the merge of a record the group
// already holds with the group's adds nothing (what decides whether a
// restarted replica writes its kept records back, replica.adds), and
// copies do not pile up as the value goes from replica to replica. A
// wait of the same length measured later, on a clock where it has not
// begun, that ends sooner by its reset stays beside the other.
func TestMergeWaitsTakesAShiftedCopyOnce(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	w := Wait{Until: now.Add(time.Hour), Reason: WaitThrottled, Why: "429", Measured: now, Announced: time.Hour}
	shifted := func(w Wait, d time.Duration) Wait {
		m, err := ShiftWaits(waitsJSON(t, w), d)
		if err != nil {
			t.Fatal(err)
		}
		var r waitsRecord
		_ = json.Unmarshal(m, &r)
		return r.Waits[0]
	}
	group := waitsJSON(t, shifted(w, 3*time.Millisecond))
	onlyGroup, err := MergeWaits(group, group, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		own, group json.RawMessage
	}{
		{"the first saved own", waitsJSON(t, w), group},
		{"the first saved the group's", group, waitsJSON(t, w)},
		{"copies of copies", waitsJSON(t, w, shifted(w, time.Millisecond)), waitsJSON(t, shifted(w, 2*time.Millisecond), shifted(w, 3*time.Millisecond))},
	} {
		m, err := MergeWaits(c.own, c.group, now)
		if err != nil {
			t.Fatal(err)
		}
		if string(m) != string(onlyGroup) {
			t.Errorf("%s: merged %s, want the group's copy alone %s", c.name, m, onlyGroup)
		}
	}

	// A reset bounds the wait at a minute past it (from the answer's
	// arrival, its Date 10 s ahead): measured later, on a clock where the
	// answer has not arrived yet, the copy ends sooner.
	r := Wait{Until: now.Add(2 * time.Hour), Reason: WaitDailyQuota, Why: "429", Measured: now.Add(-time.Second), Announced: 2 * time.Hour,
		Reset: now.Add(time.Hour), ServerAt: now.Add(10 * time.Second)}
	ahead := shifted(r, 2*time.Second)
	m, _ := MergeWaits(waitsJSON(t, r), waitsJSON(t, ahead), now)
	var got waitsRecord
	_ = json.Unmarshal(m, &got)
	if len(got.Waits) != 2 || ahead.Remaining(now) >= r.Remaining(now) {
		t.Errorf("merged %s: want both (remaining %v and the copy's %v)", m, r.Remaining(now), ahead.Remaining(now))
	}
}
