package poller

import (
	"slices"
	"testing"
	"time"
)

var lt0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

func at(s int) time.Time { return lt0.Add(time.Duration(s) * time.Second) }

// TestLedgerPlansFromItsGaps: what each sequence of verified reads leaves
// owed at an age, below a bound.
func TestLedgerPlansFromItsGaps(t *testing.T) {
	levels := []time.Duration{10 * time.Second, 300 * time.Second}
	type read struct{ lo, hi, ref int }
	cases := []struct {
		name     string
		reads    []read
		age      time.Duration
		upto     int
		from, to int
		ok       bool
	}{
		{"nothing read: all owed", nil, 10 * time.Second, 100, 0, 100, true},
		{"a sweep's window: its old part reached the overlap's age", []read{{0, 50, 52}}, 10 * time.Second, 40, 0, 0, false},
		{"the window's old part reached the overlap", []read{{0, 50, 52}}, 10 * time.Second, 42, 43, 42, false},
		{"split sweeps: the part read at 10 s only below ref-10", []read{{0, 50, 52}}, 10 * time.Second, 50, 42, 50, true},
		{"a second look read it later", []read{{0, 50, 52}, {42, 49, 60}}, 10 * time.Second, 50, 0, 0, false},
		{"a second look read part of it", []read{{0, 50, 52}, {42, 46, 60}}, 10 * time.Second, 50, 47, 50, true},
		{"a failed read in between leaves a gap", []read{{0, 20, 400}, {31, 60, 400}}, 300 * time.Second, 100, 21, 31, true},
		{"owed at the probe's age, not at the overlap's", []read{{0, 60, 100}}, 300 * time.Second, 100, 0, 100, true},
		{"read at the probe's age", []read{{0, 60, 400}}, 300 * time.Second, 61, 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := ledger{Floor: at(0)}
			for _, r := range c.reads {
				l.record(at(r.lo), at(r.hi), at(r.ref), levels)
			}
			from, to, ok := l.owed(c.age, at(c.upto))
			if ok != c.ok || ok && (!from.Equal(at(c.from)) || !to.Equal(at(c.to))) {
				t.Errorf("owed(%v, %d) = %v..%v %v; want %d..%d %v (ledger %+v)", c.age, c.upto, from.Sub(lt0), to.Sub(lt0), ok, c.from, c.to, c.ok, l)
			}
		})
	}
}

// TestLedgerNeverClaimsMore: a bounded ledger, its floor moved over what
// was read at every age, forgets (owes again) rather than claims.
func TestLedgerNeverClaimsMore(t *testing.T) {
	levels := []time.Duration{10 * time.Second, 300 * time.Second}
	l := ledger{Floor: at(0)}
	// Sweeps every 2 s reading 5 s below, a hole every 10th.
	for i := 0; i < 1000; i++ {
		if i%10 == 3 {
			continue
		}
		l.record(at(2*i-5), at(2*i), at(2*i+1), levels)
	}
	if len(l.Spans) > maxSpans {
		t.Fatalf("%d spans; want at most %d", len(l.Spans), maxSpans)
	}
	// The holes were never read: each is owed at the overlap's age.
	from, _, ok := l.owed(10*time.Second, at(2000))
	if !ok || from.After(at(2*3-5+5)) {
		t.Errorf("the first hole is not owed: %v %v", from.Sub(lt0), ok)
	}
	// A probe reads everything at 300 s: the floor moves up, the spans go.
	l.record(at(0), at(1700), at(2001), levels)
	if !l.Floor.Equal(at(1701)) {
		t.Errorf("floor %v after reading 0..1700 at 300 s or more; want 1701", l.Floor.Sub(lt0))
	}
}

// TestLedgerValidateAgainstTheServiceClock: a restored ledger whose
// claims lie beyond the service's evidence is cut to it; one within it is
// kept as it is, however far the local clock is behind.
func TestLedgerValidateAgainstTheServiceClock(t *testing.T) {
	levels := []time.Duration{10 * time.Second, 300 * time.Second}
	l := ledger{Floor: at(0)}
	l.record(at(0), at(100), at(700), levels)
	l.record(at(101), at(200), at(212), levels)
	keep := l
	keep.Spans = append([]span(nil), l.Spans...)
	if l.validate(at(800)) {
		t.Errorf("a ledger within the evidence was cut: %+v", l)
	}
	if len(l.Spans) != len(keep.Spans) || !l.Floor.Equal(keep.Floor) {
		t.Errorf("validate changed %+v to %+v", keep, l)
	}
	if !l.validate(at(150)) {
		t.Errorf("a ledger claiming reads after the evidence was kept: %+v", l)
	}
	if _, _, ok := l.owed(10*time.Second, at(140)); !ok {
		t.Errorf("nothing owed after the cut: %+v", l)
	}
}

// TestLedgerValidateKeepsWhatWasReadAtNoAge: a sweep's window ends at the
// Date minus settle, above the stamp evidence when the Date is ahead of
// the stamping clock (an hour here) or the newest stamp was served late:
// what it read above its watermark is recorded at no promised age, and a
// restore bounded by the evidence (or by the watermark, the clock record
// lost) keeps the ledger as it is. The same ledger an hour ahead (a file
// of a shop whose clock is ahead) claims its ages beyond the evidence: cut.
func TestLedgerValidateKeepsWhatWasReadAtNoAge(t *testing.T) {
	levels := []time.Duration{10 * time.Second, 300 * time.Second}
	const hour = 3600
	l := ledger{Floor: at(-300), FloorAge: 300 * time.Second}
	// Split sweeps and a second look, the watermark at 100, 102, 104
	// (the evidence minus settle 5 s), the windows ending at the Date
	// minus settle, an hour above.
	l.record(at(90), at(hour+100), at(100), levels)
	l.record(at(95), at(hour+102), at(102), levels)
	l.record(at(-300), at(80), at(104), levels)
	kept := l.clone()
	for _, bound := range []time.Time{at(109), at(104)} {
		l := kept.clone()
		if l.validate(bound) {
			t.Errorf("bound %v: a healthy ledger was cut: %+v", bound.Sub(lt0), l)
		}
		if !slices.Equal(l.Spans, kept.Spans) || !l.Floor.Equal(kept.Floor) || l.FloorAge != kept.FloorAge {
			t.Errorf("bound %v: validate changed %+v to %+v", bound.Sub(lt0), kept, l)
		}
	}
	if _, _, ok := kept.owed(10*time.Second, at(hour)); !ok {
		t.Fatalf("the stretch read above the watermark is claimed at the overlap's age: %+v", kept)
	}

	moved := kept.clone()
	moved.Floor = moved.Floor.Add(hour * time.Second)
	for i := range moved.Spans {
		moved.Spans[i].From = moved.Spans[i].From.Add(hour * time.Second)
		moved.Spans[i].To = moved.Spans[i].To.Add(hour * time.Second)
	}
	if !moved.validate(at(109)) {
		t.Fatalf("a ledger claiming ages an hour beyond the evidence was kept: %+v", moved)
	}
	for _, s := range moved.Spans {
		if s.Age > 0 && s.To.Add(s.Age).After(at(109)) {
			t.Errorf("after the cut, %v..%v is still claimed at %v, beyond the evidence", s.From.Sub(lt0), s.To.Sub(lt0), s.Age)
		}
	}
	if moved.Floor.After(at(110)) {
		t.Errorf("after the cut, the floor %v is above the evidence", moved.Floor.Sub(lt0))
	}
}

// TestLedgerRewind: a service clock that went back makes every earlier
// read younger by the jump.
func TestLedgerRewind(t *testing.T) {
	levels := []time.Duration{10 * time.Second, 300 * time.Second}
	l := ledger{Floor: at(0)}
	l.record(at(1000), at(1100), at(1120), levels)
	l.rewind(60*time.Second, levels)
	if from, _, ok := l.owed(10*time.Second, at(1110)); !ok || from.After(at(0)) {
		t.Errorf("owed after a rewind of 60 s: %v %v; want from below the old floor", from.Sub(lt0), ok)
	}
}

// TestRelevelKeepsTheProbesPromise: the overlap widens from 166 s to the
// probes' age (300 s) while a probe is under way. What the second look
// read at 166 s below the new horizon was never read at 300 s: a change
// that became visible 200 s late there is the probes' to find, so the
// stretch stays owed at 300 s (found by the simulation: seed 1001, the
// floor moved over it and the change got no event).
func TestRelevelKeepsTheProbesPromise(t *testing.T) {
	before := []time.Duration{166 * time.Second, 300 * time.Second}
	l := ledger{Floor: at(950), FloorAge: 300 * time.Second}
	l.record(at(950), at(1000), at(1200), before) // read at 166 s and more, not at 300 s
	// The overlap widens when the watermark is at 1400.
	l.relevel(166*time.Second, 300*time.Second, before, at(1400-301))
	l.compact([]time.Duration{300 * time.Second})
	if from, _, ok := l.owed(300*time.Second, at(1001)); !ok || !from.Equal(at(950)) {
		t.Errorf("owed at 300 s after the overlap widened to it: %v %v; want from 950 (ledger %+v)", from.Sub(lt0), ok, l)
	}
	// With no probes' age between, a widening keeps what was read below
	// the horizon (no change can become visible within the new overlap).
	l = ledger{Floor: at(950), FloorAge: 300 * time.Second}
	l.record(at(950), at(1000), at(1200), before[:1])
	l.relevel(166*time.Second, 200*time.Second, before[:1], at(1400-201))
	if from, _, ok := l.owed(200*time.Second, at(1001)); ok {
		t.Errorf("owed at 200 s below the horizon after a widening with no age between: from %v (ledger %+v)", from.Sub(lt0), l)
	}
}

// TestRaisedPromiseOwesBelowTheFloor: the floor moved over what was read
// at 300 s; the overlap widens to 600 s. The stamps below the floor above
// the new horizon were never read at 600 s: owed; those below it keep the
// promise in force when they were read.
func TestRaisedPromiseOwesBelowTheFloor(t *testing.T) {
	levels := []time.Duration{10 * time.Second, 300 * time.Second}
	l := ledger{Floor: at(0), FloorAge: 300 * time.Second}
	l.record(at(0), at(1000), at(1400), levels) // read at 300 s up to 1100
	if !l.Floor.Equal(at(1001)) || l.FloorAge != 300*time.Second {
		t.Fatalf("floor %v at %v; want 1001 at 300 s", l.Floor.Sub(lt0), l.FloorAge)
	}
	l.raise(600*time.Second, at(1400-601))
	l.compact([]time.Duration{600 * time.Second})
	from, to, ok := l.owed(600*time.Second, at(1000))
	if !ok || !from.Equal(at(799)) || !to.Equal(at(1000)) {
		t.Errorf("owed at 600 s: %v..%v %v; want 799..1000 (ledger %+v)", from.Sub(lt0), to.Sub(lt0), ok, l)
	}
	if age := l.FloorAge; age != 600*time.Second {
		t.Errorf("floor age %v; want 600 s", age)
	}
}
