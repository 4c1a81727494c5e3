package poller

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// maxDailyLimit bounds a restored record's daily limit: ten times the
// largest contract's (282,000 calls a day); beyond it the record is damaged.
const maxDailyLimit = 3_000_000

// longPeriod is the length of the service's long throttling period (a day).
const longPeriod = 24 * time.Hour

// budgetBurst is the bucket's size in refill time: a first sync or a
// catch-up of this many calls' worth runs at the short period's pace and
// the next sweep still starts on time.
const budgetBurst = time.Hour

// budgetFloor is the lowest share of the refill rate the sweeps are paced
// to while the bucket is in debt: the debt is paid back, and the gap stays
// bounded (at most 1/budgetFloor times a sweep's cost in refill time).
const budgetFloor = 0.1

// Budget is the sweeps' share of the service's long-period (daily) quota:
// a token bucket refilled at share x limit a day, holding at most an hour
// of refill and never more than share x the calls the service says are
// left. Sweeps spend it; the gap between sweeps is the interval while the
// bucket is at least half full, and stretches smoothly as it runs low, so
// that the sweeps' calls over any day stay within share x limit plus the
// bucket's size. A sweep is never cut short by the budget: a first sync runs
// at the pace the short-period limits allow, and the debt it leaves is paid
// back by spacing the following sweeps (never by hours of silence). What is
// not known (no long-period headers, calls left unreadable) stretches
// nothing. A Budget is not safe for concurrent use.
type Budget struct {
	share float64

	level float64 // tokens; negative = debt
	at    time.Time
	limit int // the long period's limit the bucket was sized for; 0 = unknown

	costs []int // calls of the last sweeps

	// mean is the long-run cost of a sweep: the mean of everything charged
	// per sweep (its own calls, retries, logins, the probe's slice after
	// it) over the last meanCycles sweeps, each counted at most burstCost
	// times the median (a first sync or a catch-up is the bucket's to
	// pay); cycles is how many it holds (at most meanCycles).
	mean   float64
	cycles int

	next time.Time     // no sweep before this (Run; persisted)
	gap  time.Duration // the gap next was derived from

	empty bool // starts empty, not full, once the limit is named (StartEmpty)

	// checked is how far the second look got, as an earlier version kept
	// it in the budget's record: restored as written, for the read ledger
	// to migrate (reads.go); never written again.
	checked time.Time

	// id names this budget among the group's (a random key of spent);
	// spent is what each budget of the group has taken, as far as known
	// (this one's own under id); inbox holds the group's record to absorb
	// (budget_group.go).
	id    string
	spent map[string]Spend
	inbox *budgetInbox
}

// NewBudget returns an empty budget for share (0 < share <= 1); it fills
// on the first Throttle that names the long period's limit.
func NewBudget(share float64) *Budget {
	if share <= 0 || share > 1 {
		share = 0.25
	}
	return &Budget{share: share, id: newBudgetID(), spent: map[string]Spend{}, inbox: &budgetInbox{}}
}

// rate is the refill in calls per second.
func (b *Budget) rate() float64 {
	return b.share * float64(b.limit) / longPeriod.Seconds()
}

// Rate is the bucket's refill in calls a second, and false while the
// service has not named its daily limit.
func (b *Budget) Rate() (float64, bool) {
	if b.limit == 0 {
		return 0, false
	}
	return b.rate(), true
}

func (b *Budget) capacity() float64 {
	return b.rate() * budgetBurst.Seconds()
}

// refill brings the bucket to now under what the service last said
// (and what other replicas of the group spent: absorb, after the refill,
// as if spent at now: taken before it, a full bucket's refill since would
// pay it back).
func (b *Budget) refill(now time.Time, th plenty.Throttle) {
	long := th.Long
	if long.Present && long.Limit > 0 && long.Limit != b.limit {
		full := b.limit == 0
		b.limit = long.Limit
		if full && !b.empty {
			b.level = b.capacity()
		}
	}
	if b.limit > 0 {
		if !b.at.IsZero() && now.After(b.at) {
			b.level += b.rate() * now.Sub(b.at).Seconds()
		}
		b.level = min(b.level, b.capacity())
	}
	b.at = now
	b.absorb()
}

// avail is the level the sweeps may use under what the service last said:
// never more than share x the calls it says are left until the period
// resets (other integrations spent the day). The bound is not taken out of
// the bucket: at the reset the long period's calls come back, and with
// them the level earned meanwhile.
func (b *Budget) avail(th plenty.Throttle) float64 {
	if long := th.Long; long.Present && long.CallsLeft >= 0 {
		return min(b.level, b.share*float64(long.CallsLeft))
	}
	return b.level
}

// meanCycles is the span of the long-run mean cost in sweeps: at a sweep
// every 2 to 8 s, minutes, longer than the probe's period.
const meanCycles = 64

// burstCost bounds what one sweep adds to the long-run mean, in medians:
// more (a first sync, a catch-up after an outage) is a burst, paid by the
// bucket and back by the slower pace of a bucket below full.
const burstCost = 4

// Spend takes a sweep's calls from the bucket, and counts them in the
// cost that paces the sweeps (the median of the last five, and the
// long-run mean).
func (b *Budget) Spend(now time.Time, calls int, th plenty.Throttle) {
	b.Take(now, calls, th)
	b.Cost(calls)
}

// Cost notes what a sweep cost in all (the pace follows it) without
// charging it: its calls were charged as they went out (Charge).
func (b *Budget) Cost(calls int) {
	b.costs = append(b.costs, calls)
	if len(b.costs) > 5 {
		b.costs = b.costs[1:]
	}
	if len(b.costs) >= 3 {
		b.cycles = min(b.cycles+1, meanCycles)
		b.mean += (min(float64(calls), burstCost*b.cost()) - b.mean) / float64(b.cycles)
	}
}

// StartEmpty makes a budget that knows no level start empty instead of
// full once the service names its limit: a state file that shows earlier
// work but holds no budget record was left by a process killed before it
// saved one, whose calls are not known.
func (b *Budget) StartEmpty() {
	if b.limit == 0 {
		b.empty = true
	}
}

// Take takes calls from the bucket as they go out, before the sweep or
// probe they belong to has ended (Cost or Extra count them in the pace).
func (b *Budget) Take(now time.Time, calls int, th plenty.Throttle) {
	b.refill(now, th)
	if b.limit > 0 {
		b.level -= float64(calls)
	}
	b.count(now, calls)
}

// Extra counts calls that are no sweep's own (a probe's slice between
// sweeps) in the long-run mean, as part of the sweep they follow (a probe
// costs the pace what it reads), not in the median. A re-read serves
// several sweeps (a second look every third or fourth, a probe's slices
// over minutes): on a mean of fewer than extraCycles sweeps (a process
// that has just started) it counts as spread over extraCycles, not as a
// call more for every sweep.
func (b *Budget) Extra(calls int) {
	if b.cycles > 0 {
		b.mean += float64(calls) / float64(max(b.cycles, extraCycles))
	}
}

// extraCycles is the fewest sweeps a re-read's calls are spread over in
// the long-run mean (Extra).
const extraCycles = 8

// Charge takes calls that are no sweep's own from the bucket and counts
// them in the long-run mean (Take and Extra).
func (b *Budget) Charge(now time.Time, calls int, th plenty.Throttle) {
	b.Take(now, calls, th)
	b.Extra(calls)
}

// longRun is what a sweep costs in the long run: the mean of everything
// charged per sweep (see mean), and never less than the median of the
// last five (the mean spans minutes: sweeps that cost more for good, a
// busy hour, pace the sweeps from the third).
func (b *Budget) longRun() float64 {
	return max(b.mean, b.cost())
}

// Remaining is the bucket's level (calls; negative while in debt) as the
// service's calls left bound it, and false when the service has not named
// its long-period limit.
func (b *Budget) Remaining(now time.Time, th plenty.Throttle) (float64, bool) {
	b.refill(now, th)
	return b.avail(th), b.limit > 0
}

// cost is what the next sweep is expected to cost: the median of the last
// five sweeps (one expensive sweep does not count), 1 (a quiet sweep)
// before three are known.
func (b *Budget) cost() float64 {
	if len(b.costs) < 3 {
		return 1
	}
	c := slices.Clone(b.costs)
	slices.Sort(c)
	return float64(max(c[len(c)/2], 1))
}

// Pace of the sweeps when no interval is set (RunConfig.Interval 0).
const (
	// MinGap: never more than one sweep a second, whatever the budget.
	MinGap = time.Second
	// DefaultGap is the pace before the service has named its daily limit
	// (and for a service that never does): one call every 5 s is 17,280 a
	// day, within a quarter of the smallest daily quota we know.
	DefaultGap = 5 * time.Second
)

// Where the pace of the sweeps comes from (also settle and overlap, see
// Timings).
const (
	SourceExplicit = "explicit"      // a configured value (WATCHER_POLL_INTERVAL, _SETTLE, _OVERLAP)
	SourceBudget   = "budget"        // the call budget and the measured cost of a sweep
	SourceDefault  = "default"       // nothing measured yet
	SourceLate     = "late_arrivals" // the measured late arrivals
)

// Pace is the interval in force and where it comes from: an explicit
// interval (> 0) as it is; without one, what a sweep costs in the long run
// (everything charged per sweep, a probe's slices, retries and logins
// included, over the last minutes) at the budget's refill rate (share x
// daily limit / 86400: 2.08 s for a one-call sweep at 0.25 x 166,000), at
// least MinGap, rounded up to the millisecond so that the sweeps spend the
// share and no more from the first minutes on; DefaultGap while the
// service has not named its daily limit.
func (b *Budget) Pace(interval time.Duration) (time.Duration, string) {
	if interval > 0 {
		return interval, SourceExplicit
	}
	if b.limit == 0 {
		return DefaultGap, SourceDefault
	}
	ms := math.Ceil(b.longRun() / b.rate() * 1000)
	return max(time.Duration(ms)*time.Millisecond, MinGap), SourceBudget
}

// Gap returns the time from the start of the sweep just done to the start
// of the next, and why it is longer than the pace ("" when it is not). The
// pace is Pace(interval): an explicit interval is the floor, and without
// one the sweeps spend the refill and no more, so the bucket stays full
// for the bursts (a first sync, a catch-up) in the long run.
func (b *Budget) Gap(now time.Time, interval time.Duration, th plenty.Throttle) (time.Duration, string) {
	b.refill(now, th)
	pace, _ := b.Pace(interval)
	if b.limit == 0 {
		return pace, ""
	}
	r := b.rate()
	long := th.Long
	// The period resets within a day: a -Decay of months is a bad header.
	long.Decay = min(long.Decay, longPeriod)
	// What the service says is left bounds the pace too: share x calls left
	// until the period resets, where that is clearly less than the refill
	// (other integrations spent the day).
	rl := -1.0
	if long.Present && long.CallsLeft >= 0 && long.Decay > 0 {
		if v := b.share * float64(long.CallsLeft) / long.Decay.Seconds(); v < 0.9*r {
			rl = v
		}
	}
	// At the reset the long period's calls come back: a pace set by what
	// is left of it never reaches past the reset (Decay is whole seconds,
	// rounded down: one more).
	untilReset := long.Decay + time.Second
	if rl == 0 {
		// Nothing left to share: the pacer keeps its reserve until the
		// period resets; sweep again when it has.
		return max(pace, untilReset), fmt.Sprintf("the service reports %d calls left of the daily quota until it resets in %s", long.CallsLeft, long.Decay.Round(time.Second))
	}
	c := b.capacity()
	level := b.avail(th)
	allowed := math.Inf(1) // calls per second the sweeps may spend now
	var why string
	switch {
	case level >= c/2:
	case level >= 0:
		// From unbounded at half full to the refill rate when empty.
		allowed = r * c / (c - 2*level)
		why = fmt.Sprintf("call budget low: %.0f of %.0f calls left", level, c)
	default:
		allowed = r * max(budgetFloor, 1+level/c)
		why = fmt.Sprintf("call budget in debt by %.0f calls: sweeps spaced to pay it back", math.Ceil(-level))
	}
	byLeft := false
	cost := b.cost()
	if interval <= 0 {
		// Derived pace: the long-run cost of a sweep at the refill while
		// the bucket is full, a little less below (see derivedShare).
		cost = b.longRun()
		if v := r * derivedShare(level, c, cost); v < allowed {
			allowed = v
			if level >= 0 {
				why = fmt.Sprintf("call budget below full: %.0f of %.0f calls left, sweeps spaced to refill it", level, c)
			}
		}
	}
	if rl > 0 && rl < allowed {
		allowed, byLeft = rl, true
		why = fmt.Sprintf("the service reports %d calls left of the daily quota for %s: our share of them paces the sweeps", long.CallsLeft, long.Decay.Round(time.Second))
	}
	if math.IsInf(allowed, 1) {
		return pace, ""
	}
	gap := time.Duration(cost / allowed * float64(time.Second))
	if byLeft {
		gap = min(gap, untilReset)
	}
	if gap <= pace {
		return pace, ""
	}
	return gap, why
}

// derivedSlope is how fast the derived pace backs off as the bucket's upper
// half empties (see derivedShare).
const derivedSlope = 8

// derivedShare is the part of the refill the derived pace spends at a
// bucket level of level calls (of c), when a sweep costs cost in the long
// run. In the bucket's upper half: all of it while the bucket is full but
// for a few sweeps (the long-run cost is an estimate: what it misses shows
// as a bucket below full), less as the bucket runs lower: 8 % less for each
// 1 % of the bucket missing, down to 0.9 (the estimate lags the first
// minutes of a busy shop by a few percent: a gentler slope let those
// minutes run 4 % above the share), so that the bucket stays full for the
// bursts (a first sync, a catch-up) and any minutes stay within the share. In
// its lower half: all of it, the level held (a bucket a burst spent, or a
// busy week drained, refills in the hours that cost less than the
// long-run mean, not by slower sweeps: every hour spends the share, no
// more, no less). In debt: 0.9 of it, down to budgetFloor deep in debt
// (a burst larger than the bucket is paid back).
func derivedShare(level, c, cost float64) float64 {
	switch {
	case level >= c/2:
		return min(1, max(0.9, 1-derivedSlope*(c-5*cost-level)/c))
	case level >= 0:
		return 1
	}
	return max(budgetFloor, 0.9*(1+level/c))
}

// BudgetState is what a Budget keeps across a restart (the state record
// "budget"): its level with the time it was measured, the limit it was
// sized for, the last sweeps' costs, and when the next sweep may start.
type BudgetState struct {
	Level float64   `json:"level"` // calls; negative = debt
	At    time.Time `json:"at"`    // when Level was measured (local clock)
	Limit int       `json:"limit"` // the long period's limit; 0 = not named yet
	Costs []int     `json:"costs,omitempty"`
	// Mean is the long-run cost of a sweep over the last Cycles sweeps.
	Mean   float64 `json:"mean,omitempty"`
	Cycles int     `json:"cycles,omitempty"`
	// Next is the earliest start of the next sweep (local clock), Gap the
	// gap it was derived from: a restored wait for it never exceeds Gap.
	Next time.Time     `json:"next,omitzero"`
	Gap  time.Duration `json:"gapNs,omitempty"`
	// Checked: every second of the service's timeline below it was read
	// at the overlap's age or later (the second look's progress as an
	// earlier version kept it). Read from such a record, never written:
	// the read ledger (record "reads", ledger.go) holds what was read now,
	// and starts from it when it has no record of its own.
	Checked time.Time `json:"checked,omitzero"`
	// Spent is what each budget of the group (one a process's tenure, a
	// random key) has taken, as far as this one knows: Level counts all
	// of it. A merge takes from the level what another's count adds
	// (MergeBudget), so that a replica's spend is never refunded and the
	// owner's refill still counts.
	Spent map[string]Spend `json:"spent,omitempty"`

	inbox *budgetInbox // the budget that saved it (AbsorbGroup)
}

// Snapshot returns the budget's state, to persist.
func (b *Budget) Snapshot() BudgetState {
	return BudgetState{Level: b.level, At: b.at, Limit: b.limit, Costs: slices.Clone(b.costs), Mean: b.mean, Cycles: b.cycles, Next: b.next, Gap: b.gap,
		Spent: b.spentSince(b.at), inbox: b.inbox}
}

// Restore continues from a state a previous process saved, at now: the
// saved level refilled for the time since it was measured (never beyond
// the bucket's size, and never the full bucket a new budget starts with),
// and the next sweep not before the saved time. A local clock set back
// since (now before At) refills nothing; a restored wait for the next
// sweep never exceeds the gap it was derived from. A state with no limit
// (the service never named it), or a damaged one, restores nothing; the
// level and the costs of a record are clamped (see below).
func (b *Budget) Restore(s BudgetState, now time.Time) {
	b.costs = nil
	b.restoreSpent(s.Spent)
	// A fact about the reads made, in the service's time: the read ledger
	// checks it against the service's evidence, never the local clock.
	b.checked = s.Checked
	if s.Limit <= 0 || s.Limit > maxDailyLimit || s.At.IsZero() || math.IsNaN(s.Level) || math.IsInf(s.Level, 0) {
		return // a damaged record: nothing known (the costs mean nothing without a limit either)
	}
	b.limit, b.at = s.Limit, s.At
	if s.Cycles > 0 && s.Mean >= 0 && !math.IsInf(s.Mean, 0) {
		b.mean, b.cycles = min(s.Mean, b.capacity()), min(s.Cycles, meanCycles)
	}
	// A damaged record must not stop the sweeps for good: the level within
	// a day's share of debt and the bucket's size, each cost and the mean
	// within the bucket's size (the pace at the floor stays within hours).
	b.level = min(max(s.Level, -b.share*float64(b.limit)), b.capacity())
	for _, c := range s.Costs[max(len(s.Costs)-5, 0):] {
		b.costs = append(b.costs, min(max(c, 0), int(math.Ceil(b.capacity()))))
	}
	if now.Before(s.At) {
		b.at = now // the clock went back: what passed is unknown, nothing is refilled
	}
	b.refill(now, plenty.Throttle{})
	if s.Gap > 0 && s.Next.After(now) {
		b.next, b.gap = now.Add(min(s.Next.Sub(now), s.Gap, longPeriod+time.Minute)), s.Gap
	}
}

// SetNext sets when the next sweep may start (next) and the gap it was
// derived from (Gap): saved with the budget, it holds a successor as it
// holds this process.
func (b *Budget) SetNext(next time.Time, gap time.Duration) {
	b.next, b.gap = next, gap
}

// LegacyChecked is the second look's position a record of an earlier
// version held (BudgetState.Checked; zero: none), for the read ledger to
// migrate.
func (b *Budget) LegacyChecked() time.Time { return b.checked }

// NotBefore is the earliest start of the next sweep that a restored state
// holds (zero when none).
func (b *Budget) NotBefore() time.Time { return b.next }
