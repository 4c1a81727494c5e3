package poller

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

var (
	takeoverDaySeeds = flag.Int("takeover-day-seeds", 0, "TestBudgetTakeoverDaySimulation: seeds to run (0: 1; make merge-sim runs more)")
	takeoverDayFirst = flag.Uint64("takeover-day-first", 1, "TestBudgetTakeoverDaySimulation: the first seed")
	takeoverDayHours = flag.Int("takeover-day-hours", 0, "TestBudgetTakeoverDaySimulation: hours judged after the first two (0: 3; 26 for a day past the counts' 25-hour horizon)")
)

// TestBudgetTakeoverDaySimulation: simulated hours of one shop's sweeps
// (3 calls a sweep, a probe's 10 every 5 minutes; the derived pace, or
// every 20 s with odd seeds: a bucket kept full; every third seed starts
// from an earlier version's record, without counts, in debt) by a group
// of two replicas whose clocks differ by up to 2 s, taking over from each
// other every 2 to 8 minutes, at a random instant, the way the replica
// keeps the budget: the active saves its budget after every sweep and
// merges it into the group's record (MergeBudget), a checkpoint every 10 s;
// the one that takes over restores the checkpoint, merges the group's
// record (a later state of the checkpoint's budget) and continues in a new
// Budget; one takeover in four follows a kill (20 s to the first sweep;
// half of them lose the last sweep's write of the group's record, written
// when the killed replica has started again), and after a hand-over the
// one that lost the lease now and then makes late calls, written before
// the takeover reads the group's record or up to 30 s after it; the active
// adopts what is written after its takeover (AbsorbGroup). Every read of
// a record moves it onto the reader's clock by the clocks' difference and
// a few milliseconds more. Over the hours judged (all but the first two;
// by default 3, -takeover-day-hours=26 for a day past the spent counts'
// 25-hour horizon, make merge-sim): the budget never allows more than the
// group's true bucket (every call taken at its true time) but for calls
// not written yet (no refund), the calls at least 95 % of a single
// replica's (no call charged twice), and no gap between two sweeps longer
// than a kill's pause and three paces (no stall).
func TestBudgetTakeoverDaySimulation(t *testing.T) {
	seeds, hours := *takeoverDaySeeds, *takeoverDayHours
	if seeds <= 0 {
		seeds = 1
	}
	if hours <= 0 {
		hours = 3
	}
	for seed := *takeoverDayFirst; seed < *takeoverDayFirst+uint64(seeds); seed++ {
		r, err := takeoverDay(seed, hours, true)
		if err == nil {
			t.Logf("seed %d: %s", seed, r)
			continue
		}
		t.Fatalf("seed %d: %v (%s)\nreplay: go test -run TestBudgetTakeoverDaySimulation ./poller -args -takeover-day-first=%d -takeover-day-seeds=1 -takeover-day-hours=%d", seed, err, r, seed, hours)
	}
}

// takeoverDayResult is what the hours judged of a simulation did.
type takeoverDayResult struct {
	hours, calls, sweeps, takeovers, late int
	maxGap                                time.Duration
	// low is the lowest level of the group's true bucket (every call
	// taken at its true time) in the hours judged.
	low float64
}

func (r takeoverDayResult) String() string {
	return fmt.Sprintf("%d calls in %d hours (%.0f a day, the share %d), %d sweeps, %d takeovers, %d late calls absorbed, longest gap %v, the true bucket's lowest level %.1f", r.calls, r.hours, float64(r.calls)*24/float64(max(r.hours, 1)), int(dayShare*dayDaily), r.sweeps, r.takeovers, r.late, r.maxGap, r.low)
}

// groupRec is a budget record as kept by the group: written on writer's
// clock at written.
type groupRec struct {
	raw     json.RawMessage
	writer  int
	written time.Time // true time
}

const (
	dayDaily, dayShare = 166000, 0.25
	dayCost, dayProbe  = 3, 10
	dayShortPace       = 10.0 // calls a second
	dayRate            = dayShare * dayDaily / 86400.0
)

// takeoverSim is the state of a simulation: times are true unless named
// local (a replica's clock: true + off).
type takeoverSim struct {
	rng       *rand.Rand
	interval  time.Duration
	from, end time.Time
	off       [2]time.Duration
	used      int       // the service's count of its day
	day       time.Time // its day's start
	level     float64   // the group's true bucket
	levelAt   time.Time
	unknown   float64 // calls the active's budget cannot know yet (a late write on its way)
	group     groupRec
	// before is the group's record and the checkpoint before the last
	// sweep's write, and that sweep's calls (a kill may lose the write).
	before    [2]groupRec
	lastCalls int
	ckpt      groupRec
	file      [2]json.RawMessage
	active    int
	b         *Budget
	// late is the write of the replica that lost the lease, on its way
	// (nil: none): its record, due at lateAt.
	late   json.RawMessage
	lateAt time.Time
	r      takeoverDayResult
}

// read moves a record written by g.writer onto replica i's clock: at
// least the clocks' difference (replica.shiftFrom), a few milliseconds
// more.
func (s *takeoverSim) read(g groupRec, i int) json.RawMessage {
	d := s.off[i] - s.off[g.writer]
	if i != g.writer {
		d += time.Duration(s.rng.IntN(5000)) * time.Microsecond
	}
	out, err := ShiftBudget(g.raw, d)
	if err != nil {
		panic(err)
	}
	return out
}

// th is what the service says at t.
func (s *takeoverSim) th(t time.Time) plenty.Throttle {
	if !t.Before(s.day.Add(24 * time.Hour)) {
		s.day, s.used = t.Truncate(24*time.Hour), 0
	}
	return plenty.Throttle{Long: plenty.Period{Present: true, Limit: dayDaily, CallsLeft: max(dayDaily-s.used, 0), Decay: s.day.Add(24 * time.Hour).Sub(t)}}
}

func (s *takeoverSim) truth(t time.Time) float64 {
	return min(s.level+dayRate*max(t.Sub(s.levelAt).Seconds(), 0), dayRate*3600)
}

// spend counts calls that reach the service at t.
func (s *takeoverSim) spend(t time.Time, calls int) {
	s.used += calls
	s.level, s.levelAt = s.truth(t)-float64(calls), later(s.levelAt, t)
	if !t.Before(s.from) && t.Before(s.end) {
		s.r.calls += calls
		s.r.low = min(s.r.low, s.level)
	}
}

// write merges replica i's record own into the group's at t.
func (s *takeoverSim) write(i int, own json.RawMessage, t time.Time) error {
	m := own
	if s.group.raw != nil {
		var err error
		if m, err = MergeBudget(own, s.read(s.group, i), false); err != nil {
			return err
		}
	}
	s.group = groupRec{m, i, t}
	return nil
}

// deliver writes the late record of the replica that lost the lease, and
// the active adopts the group's (replica.adopt: AbsorbGroup).
func (s *takeoverSim) deliver() error {
	if s.late == nil {
		return nil
	}
	if err := s.write(1-s.active, s.late, s.lateAt); err != nil {
		return err
	}
	s.late, s.unknown = nil, 0
	adopted, err := MergeBudget(s.file[s.active], s.read(s.group, s.active), false)
	if err != nil {
		return err
	}
	s.file[s.active] = adopted
	s.b.Snapshot().AbsorbGroup(adopted)
	return nil
}

// killPause is the time from a kill of the active to the first sweep of
// the replica that takes over (the lease's TTL, the takeover's reads).
const killPause = 20 * time.Second

// takeover moves the lease at t: the one that loses it may make a late
// call (the rest of a sweep under way, a call answered late) before the
// other's first, written before the other's takeover reads the group's
// record or up to 30 s after it; the other restores the checkpoint, merges
// the group's record (a later state of the checkpoint's when its writer
// wrote it since) and continues in a new Budget a second later. It says
// when the new active's first sweep may start.
func (s *takeoverSim) takeover(t time.Time) (time.Time, error) {
	if err := s.deliver(); err != nil {
		return t, err
	}
	old := s.active
	// One of four takeovers follows a kill: the lease lapses first (no
	// late call then), the others a hand-over of a second.
	pause := time.Second
	killed := s.rng.IntN(4) == 0
	if killed {
		pause = killPause
		if s.rng.IntN(2) == 0 {
			// Killed between its save and the write of the group's record:
			// its state file keeps the last sweep (replica.unsent), written
			// when it has started again, a few minutes later.
			s.group, s.ckpt = s.before[0], s.before[1]
			s.late, s.lateAt, s.unknown = s.file[old], t.Add(time.Duration(10+s.rng.IntN(170))*time.Second), float64(s.lastCalls)
		}
	}
	if !killed && s.rng.IntN(4) == 0 {
		lt := t.Add(time.Duration(s.rng.IntN(1000)) * time.Millisecond)
		calls := 1 + s.rng.IntN(40)
		s.b.Take(lt.Add(s.off[old]), calls, s.th(lt))
		s.spend(lt, calls)
		s.file[old], _ = json.Marshal(s.b.Snapshot())
		if s.rng.IntN(2) == 0 {
			if err := s.write(old, s.file[old], lt); err != nil {
				return t, err
			}
		} else {
			s.late, s.lateAt, s.unknown = s.file[old], t.Add(time.Second+time.Duration(s.rng.IntN(30000))*time.Millisecond), float64(calls)
		}
		if !t.Before(s.from) {
			s.r.late++
		}
	}
	if !t.Before(s.from) {
		s.r.takeovers++
	}
	s.active = 1 - old
	now := t.Add(pause)
	s.file[s.active] = s.read(s.ckpt, s.active)
	newer := s.group.writer == s.ckpt.writer && s.group.written.After(s.ckpt.written)
	m, err := MergeBudget(s.file[s.active], s.read(s.group, s.active), newer)
	if err != nil {
		return t, err
	}
	s.file[s.active] = m
	var st BudgetState
	_ = json.Unmarshal(m, &st)
	s.b = NewBudget(dayShare)
	s.b.Restore(st, now.Add(s.off[s.active]))
	return later(now, s.b.NotBefore().Add(-s.off[s.active])), nil
}

// sweep is the active's sweep at t (calls that go out at the short
// period's pace, the budget saved and written after it): it says when the
// next may start. The budget may never allow more than the true bucket
// holds, but for the calls it cannot know yet.
func (s *takeoverSim) sweep(t time.Time, probe bool) (time.Time, error) {
	calls := dayCost
	if probe {
		calls += dayProbe
	}
	local := t.Add(s.off[s.active])
	if believed, _ := s.b.Remaining(local, s.th(t)); believed > s.truth(t)+s.unknown+0.5 {
		return t, fmt.Errorf("at %v (replica %d active) the budget allows %.1f calls, the group's true bucket holds %.1f (%.0f on their way): a refund", t.Sub(s.from.Add(-time.Hour)), s.active, believed, s.truth(t), s.unknown)
	}
	s.spend(t, calls)
	took := time.Duration(float64(calls) / dayShortPace * float64(time.Second))
	done := local.Add(took)
	s.b.Spend(done, dayCost, s.th(t.Add(took)))
	s.b.Charge(done, calls-dayCost, s.th(t.Add(took)))
	gap, _ := s.b.Gap(done, s.interval, s.th(t.Add(took)))
	s.b.SetNext(local.Add(max(gap, took)), gap)
	s.file[s.active], _ = json.Marshal(s.b.Snapshot())
	s.before, s.lastCalls = [2]groupRec{s.group, s.ckpt}, calls
	if err := s.write(s.active, s.file[s.active], t.Add(took)); err != nil {
		return t, err
	}
	if s.ckpt.raw == nil || t.Sub(s.ckpt.written) >= 10*time.Second {
		s.ckpt = groupRec{s.file[s.active], s.active, t.Add(took)}
	}
	return t.Add(max(gap, took)), nil
}

func takeoverDay(seed uint64, hours int, takeovers bool) (takeoverDayResult, error) {
	rng := rand.New(rand.NewPCG(seed, 0x646179))
	start := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	s := &takeoverSim{rng: rng, from: start.Add(2 * time.Hour), day: start, level: dayRate * 3600, levelAt: start, b: NewBudget(dayShare)}
	s.end = s.from.Add(time.Duration(hours) * time.Hour)
	s.off[1] = time.Duration(rng.Int64N(int64(4*time.Second))) - 2*time.Second
	if seed%2 == 1 {
		s.interval = 20 * time.Second
	}
	s.r.low, s.r.hours = s.level, hours
	if seed%3 == 0 {
		// The group's record is an earlier version's (no counts), 1,500
		// calls in debt: paid back within the first two hours.
		raw, _ := json.Marshal(BudgetState{Level: -1500, At: start, Limit: dayDaily, Costs: []int{dayCost, dayCost, dayCost}, Mean: dayCost, Cycles: 3})
		s.group, s.ckpt, s.level = groupRec{raw, 0, start}, groupRec{raw, 0, start}, -1500
		var st BudgetState
		_ = json.Unmarshal(raw, &st)
		s.b.Restore(st, start)
	}
	var prev, probed time.Time
	next := start.Add(time.Second)
	handover := start.Add(time.Duration(2+rng.IntN(7)) * time.Minute)
	for t := start; t.Before(s.end); {
		var err error
		switch {
		case takeovers && !next.Before(handover):
			t = handover
			next, err = s.takeover(t)
			handover = t.Add(time.Duration(2*60+rng.IntN(6*60)) * time.Second)
		case s.late != nil && !next.Before(s.lateAt):
			err = s.deliver()
		default:
			t = next
			if !prev.IsZero() && !t.Before(s.from) && t.Before(s.end) {
				s.r.maxGap = max(s.r.maxGap, t.Sub(prev))
				s.r.sweeps++
			}
			prev = t
			probe := t.Sub(probed) >= 5*time.Minute
			if probe {
				probed = t
			}
			next, err = s.sweep(t, probe)
		}
		if err != nil {
			return s.r, err
		}
	}
	if !takeovers {
		return s.r, nil
	}
	single, _ := takeoverDay(seed, hours, false)
	if s.r.calls < single.calls*95/100 {
		return s.r, fmt.Errorf("%d calls in %d hours, a single replica's %d: calls charged twice", s.r.calls, hours, single.calls)
	}
	pace := time.Duration(math.Ceil(float64(time.Second) * dayCost / dayRate))
	if s.interval > 0 {
		pace = s.interval
	}
	if limit := killPause + 3*pace; s.r.maxGap > limit {
		return s.r, fmt.Errorf("longest gap between sweeps %v, want at most %v (a takeover after a kill and three paces)", s.r.maxGap, limit)
	}
	return s.r, nil
}
