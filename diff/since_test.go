package diff

import (
	"bytes"
	"testing"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// tracked is s without StatusSince: what StateOf returns and events carry.
func tracked(s State) State {
	s.StatusSince = order.Time{}
	return s
}

// TestDecideStatusSince: when the snapshot says an order entered its
// status, for each kind of decision.
func TestDecideStatusSince(t *testing.T) {
	const (
		t0 = "2026-11-22T10:02:41+01:00" // baseEntry's updatedAt
		t1 = "2026-11-22T10:05:00+01:00"
		t2 = "2026-11-23T08:00:00+01:00"
	)
	baseline := Options{Baseline: mustTime(t, "2026-11-21T00:00:00+01:00")}
	// since returns a previous state whose status was entered at s.
	since := func(s string, overrides ...string) *State {
		p := stateOf(t, overrides...)
		p.StatusSince = order.Time{Time: mustTime(t, s)}
		return p
	}
	for _, tc := range []struct {
		name  string
		prev  *State
		entry []string
		opt   Options
		want  string // StatusSince of next, RFC 3339
	}{
		{name: "first sync: updatedAt at first sight", entry: nil, opt: Options{Baseline: baseline.Baseline, InBaseline: true}, want: t0},
		{name: "discovered: updatedAt at first sight", entry: []string{`updatedAt="` + t1 + `"`}, opt: baseline, want: t1},
		{name: "created: updatedAt at first sight", entry: []string{`createdAt="2026-11-22T10:00:00+01:00"`}, opt: baseline, want: t0},
		{name: "status changed: the new updatedAt", prev: since("2026-11-01T00:00:00Z"), entry: []string{`statusId=6`, `updatedAt="` + t2 + `"`}, opt: baseline, want: t2},
		{name: "status changed out of scope (silent): the new updatedAt", prev: since("2026-11-01T00:00:00Z"), entry: []string{`statusId=6`, `updatedAt="` + t2 + `"`},
			opt: Options{Baseline: baseline.Baseline, Scope: mustScope(t, "statusId", "9")}, want: t2},
		{name: "status appears: the new updatedAt", prev: since("2026-11-01T00:00:00Z", `statusId=null`), entry: []string{`updatedAt="` + t2 + `"`}, opt: baseline, want: t2},
		{name: "lock changed: since kept", prev: since("2026-11-01T00:00:00Z"), entry: []string{`lockStatus="permanentlyLocked"`, `updatedAt="` + t2 + `"`}, opt: baseline, want: "2026-11-01T00:00:00Z"},
		{name: "updatedAt advanced only: since kept", prev: since("2026-11-01T00:00:00Z"), entry: []string{`updatedAt="` + t2 + `"`}, opt: Options{Baseline: baseline.Baseline, EmitUpdated: true}, want: "2026-11-01T00:00:00Z"},
		{name: "5.1 -> 5.10 is no change: since kept", prev: since("2026-11-01T00:00:00Z", `statusId=5.1`), entry: []string{`statusId=5.10`, `updatedAt="` + t2 + `"`}, opt: baseline, want: "2026-11-01T00:00:00Z"},
		{name: "unchanged: since kept", prev: since("2026-11-01T00:00:00Z"), opt: baseline, want: "2026-11-01T00:00:00Z"},
		{name: "stale entry with another status: since kept", prev: since("2026-11-01T00:00:00Z", `updatedAt="`+t2+`"`), entry: []string{`statusId=6`}, opt: baseline, want: "2026-11-01T00:00:00Z"},
		{name: "unknown since (an older snapshot value): the previous updatedAt", prev: stateOf(t), entry: []string{`ownerId="9"`, `updatedAt="` + t2 + `"`}, opt: baseline, want: t0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, _, events := Decide(tc.prev, entry(t, tc.entry...), tc.opt)
			want := mustTime(t, tc.want)
			if !next.StatusSince.Equal(want) {
				t.Errorf("StatusSince = %v, want %v", next.StatusSince, want)
			}
			for _, e := range events {
				if !e.After.StatusSince.Equal(want) {
					t.Errorf("%s: after.StatusSince = %v, want %v", e.Type, e.After.StatusSince, want)
				}
			}
		})
	}
}

// mustScope is the local scope of one simple filter.
func mustScope(t *testing.T, field, raw string) *Scope {
	t.Helper()
	sp, err := SplitScope([]order.Filter{mustFilter(t, field, raw)}, nil)
	if err != nil || sp.Local == nil {
		t.Fatalf("%s=%s: local scope %v, %v", field, raw, sp.Local, err)
	}
	return sp.Local
}

// TestEncodeLeavesStatusSinceOut: StatusSince is the snapshot's
// bookkeeping; an event's before and after are the same JSON with or
// without it, and decode without it.
func TestEncodeLeavesStatusSinceOut(t *testing.T) {
	prev := stateOf(t)
	next, _, events := Decide(prev, entry(t, `statusId=6`, `updatedAt="2026-11-23T08:00:00+01:00"`), Options{})
	if len(events) != 1 || next.StatusSince.IsZero() {
		t.Fatalf("events %v, since %v", events, next.StatusSince)
	}
	with := events[0]
	with.Before = new(*with.Before)
	with.Before.StatusSince = order.Time{Time: mustTime(t, "2026-10-01T00:00:00Z")}
	without := with
	without.Before, without.After = new(tracked(*with.Before)), tracked(with.After)
	a, b := Encode(nil, with, "src"), Encode(nil, without, "src")
	if !bytes.Equal(a, b) {
		t.Errorf("StatusSince changes the event:\n%s\n%s", a, b)
	}
	if bytes.Contains(a, []byte("2026-10-01")) {
		t.Errorf("the event carries StatusSince: %s", a)
	}
	d, err := DecodeEvent(a)
	if err != nil {
		t.Fatal(err)
	}
	if !d.After.StatusSince.IsZero() || !d.Before.StatusSince.IsZero() {
		t.Errorf("DecodeEvent returns a StatusSince: %+v", d)
	}
}

func TestSinceFallsBackToUpdatedAt(t *testing.T) {
	s := *stateOf(t)
	if !s.Since().Equal(s.UpdatedAt.Time) {
		t.Errorf("unknown since: Since() = %v, want updatedAt %v", s.Since(), s.UpdatedAt)
	}
	s.StatusSince = order.Time{Time: mustTime(t, "2026-11-01T00:00:00Z")}
	if !s.Since().Equal(s.StatusSince.Time) {
		t.Errorf("Since() = %v, want %v", s.Since(), s.StatusSince)
	}
}
