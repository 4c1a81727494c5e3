package plenty

import "time"

// Tuning of the server-time estimate.
const (
	// clockTolerance is how far a Date header may stray from the estimate
	// before it is distrusted: Date has whole seconds and the response
	// takes its time, so a few seconds of slack.
	clockTolerance = 5 * time.Second
	// clockAcceptAfter: a new server time that every Date header has
	// agreed on for this long (monotonic) is accepted (the service's
	// clock may really have been set). The estimate is a hint only: it
	// places the upper end of a sweep's window; the watermark is bounded
	// by the updatedAt stamps the service serves (package poller), so an
	// accepted Date that is wrong delays nothing and hides nothing.
	clockAcceptAfter = time.Minute
)

// serverClock estimates the service's clock from its Date headers: the
// last trusted Date, carried forward on the monotonic clock. A Date that
// jumps against it by more than clockTolerance is distrusted until the new
// time has held for clockAcceptAfter. A Date can come from a front-end
// with a wrong clock for seconds or hours: the estimate is a hint, never
// the evidence a watermark rests on.
type serverClock struct {
	have   bool
	base   time.Time     // server time at monoAt (a lower bound: Date is truncated)
	monoAt time.Duration // monotonic reading of base

	suspect      bool          // Date headers disagree with the estimate
	suspectSince time.Duration // monotonic reading of the first disagreeing Date
	jump         time.Duration // how far they disagree
	candBase     time.Time     // the disagreeing clock, as the last such Date said
	candAt       time.Duration
}

type clockEventKind int

const (
	clockOK clockEventKind = iota
	clockJump
	clockAccepted
	clockRecovered
)

type clockEvent struct {
	kind clockEventKind
	jump time.Duration
}

func (c *serverClock) now(mono time.Duration) (time.Time, bool) {
	if !c.have {
		return time.Time{}, false
	}
	return c.base.Add(mono - c.monoAt), true
}

// latest is what the latest Date headers say the service's clock is at the
// monotonic reading mono, carried forward: the estimate, or, while Dates
// that jumped are distrusted, the clock they say.
func (c *serverClock) latest(mono time.Duration) (time.Time, bool) {
	if c.have && c.suspect {
		return c.candBase.Add(mono - c.candAt), true
	}
	return c.now(mono)
}

// observe feeds a Date header read at the monotonic reading mono.
func (c *serverClock) observe(date time.Time, mono time.Duration) clockEvent {
	if !c.have {
		c.have, c.base, c.monoAt = true, date, mono
		return clockEvent{}
	}
	pred := c.base.Add(mono - c.monoAt)
	dev := date.Sub(pred)
	if dev.Abs() <= clockTolerance {
		// Both are lower bounds of the true time: keep the larger, so that
		// the estimate never goes back.
		if date.After(pred) {
			c.base, c.monoAt = date, mono
		} else {
			c.base, c.monoAt = pred, mono
		}
		if c.suspect {
			c.suspect = false
			return clockEvent{kind: clockRecovered}
		}
		return clockEvent{}
	}
	if c.suspect && date.Sub(c.candBase.Add(mono-c.candAt)).Abs() <= clockTolerance {
		// Agrees with the earlier disagreeing Dates.
		c.candBase, c.candAt = date, mono
		if mono-c.suspectSince >= clockAcceptAfter {
			c.suspect = false
			c.base, c.monoAt = date, mono
			return clockEvent{kind: clockAccepted, jump: dev}
		}
		return clockEvent{kind: clockOK, jump: dev}
	}
	c.suspect, c.suspectSince, c.jump, c.candBase, c.candAt = true, mono, dev, date, mono
	return clockEvent{kind: clockJump, jump: dev}
}
