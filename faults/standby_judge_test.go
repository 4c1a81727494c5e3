package faults

import (
	"strings"
	"testing"
	"time"
)

// The judge of TestFaultStandby on the history of a run of it (21:35, the
// NATS restart): r1 held revisions 11 and 12, NATS went down, r1's
// deadline passed (it said so), r2 took revision 14 after the restart and
// was killed, restarted and took 15. The test's watch resumed late and
// missed 13 (the expiry marker) and 14: the jump in the bucket's revisions
// makes the holder unknown there.
func TestStandbyJudge(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse("15:04:05.000", s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	never := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	history := []tenure{
		{from: at("21:35:20.724"), holder: "r1"},
		{from: at("21:35:23.850"), holder: "r1"},
		{from: at("21:35:26.100"), unknown: true}, // the last revision seen before the jump
		{from: at("21:35:41.406"), holder: "r2"},
	}
	said := map[string][]span{
		"r1": {{at("21:35:20.724"), at("21:35:30.934")}},
		"r2": {{at("21:35:39.167"), at("21:35:41.400")}, {at("21:35:41.406"), never}},
	}
	r2calls := []access{{at("21:35:39.220"), "r2", "/rest/orders/search"}, {at("21:35:40.439"), "r2", "/rest/orders/search"}, {at("21:35:41.500"), "r2", "/rest/orders"}}
	calls := append([]access{{at("21:35:22.000"), "r1", "/rest/orders"}, {at("21:35:30.000"), "r1", "/rest/orders"}}, r2calls...)

	if bad, byServer := judgeCalls(history, said, calls); len(bad) > 0 || byServer != 2 {
		t.Errorf("the run's calls: flagged %q, %d judged by the history; want none flagged, 2 by the history (r1 at 22.000, r2 at 41.500)", bad, byServer)
	}
	// Without the jump noticed (the judge before): the missed revisions
	// leave r1 the holder, r2's first calls are flagged falsely.
	blind := []tenure{history[0], history[1], history[3]}
	if bad, _ := judgeCalls(blind, said, calls); len(bad) != 2 {
		t.Errorf("the blind judge flagged %q; want r2's two calls before 41.406 (what the test saw)", bad)
	}

	for _, c := range []struct {
		name  string
		said  map[string][]span
		calls []access
	}{
		{"a standby calls while the history is known", said, []access{{at("21:35:22.000"), "r2", "/rest/orders"}}},
		{"a demoted replica calls after its deadline, history known", said, []access{{at("21:35:42.000"), "r1", "/rest/orders"}}},
		{"both say they are active where the watch missed revisions (r1 never demoted)", map[string][]span{
			"r1": {{at("21:35:20.724"), never}},
			"r2": said["r2"],
		}, r2calls[:1]},
		{"the overlap, r1's call", map[string][]span{
			"r1": {{at("21:35:20.724"), never}},
			"r2": said["r2"],
		}, []access{{at("21:35:39.500"), "r1", "/rest/orders"}}},
		{"a call by one that did not say it was active, history unknown", said, []access{{at("21:35:35.000"), "r1", "/rest/orders"}}},
		{"a call between r2's processes", said, []access{{at("21:35:41.403"), "r2", "/rest/orders"}}},
	} {
		if bad, _ := judgeCalls(history, c.said, c.calls); len(bad) != 1 {
			t.Errorf("%s: flagged %q; want the call", c.name, bad)
		}
	}
}

func TestStandbyClaims(t *testing.T) {
	log := strings.Join([]string{
		`{"time":"2026-11-28T21:35:20.7Z","level":"INFO","msg":"holding the lease: this replica is active","revision":11}`,
		`{"time":"2026-11-28T21:35:21.0Z","level":"INFO","msg":"sweep"}`,
		`{"time":"2026-11-28T21:35:30.9Z","level":"WARN","msg":"lost the lease: this replica is a standby now"}`,
		`not json`,
		`{"time":"2026-11-28T21:35:40.0Z","level":"WARN","msg":"holding the lease of a bucket created again: active once a holder of the bucket before can no longer be"}`,
		`{"time":"2026-11-28T21:35:49.0Z","level":"INFO","msg":"the bucket's earlier holders are past their deadline: this replica is active"}`,
		`{"time":"2026-11-28T21:35:50.0Z","level":"INFO","msg":"orderwatch started"}`,
		`{"time":"2026-11-28T21:35:51.0Z","level":"INFO","msg":"holding the lease: this replica is active","revision":20}`,
		`{"time":"2026-11-28T21:35:52.0Z","level":"INFO","msg":"released the lease"}`,
		`{"time":"2026-11-28T21:35:53.0Z","level":"INFO","msg":"holding the lease: this replica is active","revision":22}`,
	}, "\n")
	ts := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, "2026-11-28T21:35:"+s+"Z"); return v }
	want := []span{{ts("20.7"), ts("30.9")}, {ts("49.0"), ts("50.0")}, {ts("51.0"), ts("52.0")}, {ts("53.0"), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}
	got := claims(log, nil)
	if len(got) != len(want) {
		t.Fatalf("claims %v; want %v", got, want)
	}
	for i := range want {
		if !got[i].from.Equal(want[i].from) || !got[i].to.Equal(want[i].to) {
			t.Errorf("claim %d: %v; want %v", i, got[i], want[i])
		}
	}
}

// A replica paused (SIGSTOP) while active says "lost the lease" only when
// it runs again: its span ends when it was stopped, the next one is
// whole; one killed ends there.
func TestStandbyClaimsCut(t *testing.T) {
	ts := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, "2026-11-28T22:14:"+s+"Z"); return v }
	log := strings.Join([]string{
		`{"time":"2026-11-28T22:14:02.3Z","msg":"holding the lease: this replica is active"}`,
		`{"time":"2026-11-28T22:14:18.36Z","msg":"lost the lease: this replica is a standby now"}`,
		`{"time":"2026-11-28T22:14:33.5Z","msg":"holding the lease: this replica is active"}`,
		`{"time":"2026-11-28T22:14:35.6Z","msg":"orderwatch started"}`,
	}, "\n")
	got := claims(log, []time.Time{ts("00.0"), ts("06.0"), ts("35.5")})
	want := []span{{ts("02.3"), ts("06.0")}, {ts("33.5"), ts("35.5")}}
	if len(got) != len(want) || !got[0].to.Equal(want[0].to) || !got[1].to.Equal(want[1].to) {
		t.Errorf("claims %v; want %v", got, want)
	}
	// The run of 22:14 (SIGSTOP of r2 at 06.0, r1 active at 15.1, r2 said
	// "lost" at 18.36 after SIGCONT, the watch missing revisions from
	// before 18.3 for the NATS restart): r1's call at 18.323 is r1's.
	said := map[string][]span{"r1": {{ts("15.1"), ts("25.3")}}, "r2": got}
	history := []tenure{{from: ts("15.1"), holder: "r1"}, {from: ts("18.0"), unknown: true}}
	call := []access{{ts("18.323"), "r1", "/rest/orders/search"}}
	if bad, _ := judgeCalls(history, said, call); len(bad) > 0 {
		t.Errorf("flagged %q", bad)
	}
	said["r2"] = claims(log, nil) // not cut: r2's stale word overlaps
	if bad, _ := judgeCalls(history, said, call); len(bad) != 1 {
		t.Errorf("uncut: flagged %q; want the call", bad)
	}
}
