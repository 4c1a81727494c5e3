package faults

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

// TestFaultStandbyTakeoverInsideQuotaWait: the shop's daily quota is spent
// with the reset 60 s ahead; the active replica's next search gets the 429
// naming it, and the active is killed (-9) 3 s later, before any sweep
// could end (so no checkpoint carries the wait). The standby takes over
// and makes no call to the shop before the reset (the wait reached the
// group at once: the limits key), and calls again within a minute after it.
func TestFaultStandbyTakeoverInsideQuotaWait(t *testing.T) {
	e := newStandbyEnv(t)
	defer e.dumpLogs()
	e.reps[0].start()
	waitReady(t, e.reps[0].addr)
	e.reps[1].start()
	waitReady(t, e.reps[1].addr)
	act := e.waitActive("an active replica", 30*time.Second)
	to := e.other(act)

	e.mu.Lock()
	first := e.accesses[0].at
	e.mu.Unlock()
	reset := time.Now().Add(60 * time.Second)
	limits := plentysim.Limits{LongLimit: 166000, LongPeriod: reset.Sub(first)}
	e.sim.SetLimits(limits)
	e.sim.ConsumeQuota("other-integration", limits.LongLimit)
	act.readyText("the active's /readyz to say it is paused", 15*time.Second, func(code int, b string) bool { return pausedForQuota(code, b) })
	time.Sleep(3 * time.Second)
	killed := time.Now()
	act.signal(syscall.SIGKILL)
	act.wait()
	waitFor(t, to.name+" to become the active replica", 30*time.Second, to.leader)
	took := time.Since(killed)
	to.readyText(to.name+"'s /readyz to say it is paused", 10*time.Second, func(code int, b string) bool { return pausedForQuota(code, b) })

	var after time.Time
	waitFor(t, to.name+" to call the shop after the reset", time.Until(reset)+90*time.Second, func() bool {
		after = e.firstCallBy(to.name, reset)
		return !after.IsZero()
	})
	if before := e.firstCallBy(to.name, killed); before.Before(reset) {
		t.Errorf("%s called the shop %v after the kill, %v before the reset the 429 named", to.name, before.Sub(killed).Round(10*time.Millisecond), reset.Sub(before).Round(10*time.Millisecond))
	}
	if late := after.Sub(reset); late > time.Minute {
		t.Errorf("%s's first call after the reset came %v after it; want within a minute", to.name, late)
	}
	to.readyText(to.name+"'s /readyz to say ok after the reset", time.Minute, func(code int, b string) bool { return code == http.StatusOK })
	t.Logf("kill -9 of %s 3 s after a 429 naming a reset 60 s ahead: %s active %v after the kill; its first call %v after the reset (%d calls in all by %s before it)",
		act.name, to.name, took.Round(10*time.Millisecond), after.Sub(reset).Round(10*time.Millisecond), e.callsBy(to.name, killed, reset), to.name)
}

// callsBy counts instance's requests in [from, to).
func (e *standbyEnv) callsBy(instance string, from, to time.Time) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, a := range e.accesses {
		if a.instance == instance && !a.at.Before(from) && a.at.Before(to) {
			n++
		}
	}
	return n
}
