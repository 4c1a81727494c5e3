package plenty_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
)

// TestLoginGuardRecordAbsurdWait (review): a "sessions" record that holds
// logins back for months (no length saved with it, or a length of months:
// a hand-edited or damaged file) holds them back no longer than the
// longest wait the guard itself ever sets (LoginBackoff).
func TestLoginGuardRecordAbsurdWait(t *testing.T) {
	for _, wait := range []time.Duration{0, 100 * 24 * time.Hour} {
		e := newEnv(t, plentysim.Config{})
		st := openState(t, filepath.Join(t.TempDir(), "state.db"))
		now := e.clk.Now()
		if err := st.SaveRecord(plenty.SessionsRecord, map[string]any{
			"not_before": now.Add(100 * 24 * time.Hour), "wait": wait, "reason": "session limit", "kind": "session_limit", "saved_at": now,
		}); err != nil {
			t.Fatal(err)
		}
		_, err := e.process(t, st, nil).SearchOrders(context.Background(), order.Query{})
		var held *plenty.LoginHeldError
		if errors.As(err, &held) && held.Until.Sub(now) > 5*time.Minute {
			t.Errorf("saved wait %v: logins held until %v, %v from now; want at most LoginBackoff (5 min)", wait, held.Until, held.Until.Sub(now))
		}
	}
}

// killable is the state file of a process killed (-9) once killed says
// so: nothing is saved after it.
type killable struct {
	plenty.SessionRecords
	killed func() bool
}

func (k *killable) SaveRecord(name string, v any) error {
	if k.killed != nil && k.killed() {
		return nil
	}
	return k.SessionRecords.SaveRecord(name, v)
}

// TestQueuedLoginNotCountedOpen (issue 28): a login queued behind a
// pending wait (a 429's Retry-After) has sent nothing; a process killed
// while it waits leaves no session that may be open. Two such kills must
// not hold the next process's login (before: each counted a session for a
// day, and with the shop's limit of 3 the third process was held for
// 23 h 49 min).
func TestQueuedLoginNotCountedOpen(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxSessions: 3})
	st := openState(t, filepath.Join(t.TempDir(), "state.db"))
	for range 2 {
		ctx, kill := context.WithCancel(context.Background())
		pacer := plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: e.clk.Now, Sleep: func(ctx context.Context, d time.Duration) error {
			kill() // killed while the login waits its turn
			return ctx.Err()
		}})
		now := e.clk.Now()
		pacer.Restore(plenty.Wait{Until: now.Add(time.Hour), Reason: plenty.WaitThrottled, Why: "429 with Retry-After", Measured: now, Announced: time.Hour})
		file := &killable{SessionRecords: st}
		c := e.process(t, st, func(c *plenty.Config) { c.Pacer, c.Sessions = pacer, file })
		file.killed = func() bool { return ctx.Err() != nil }
		if err := c.Login(ctx); err == nil {
			t.Fatal("the login went out through a pending wait")
		}
		e.clk.Advance(time.Minute)
		st = restart(t, st)
	}
	if n := e.sim.Stats().LoginCalls; n != 0 {
		t.Fatalf("%d logins reached the service; want none", n)
	}
	if err := e.process(t, st, nil).Login(context.Background()); err != nil {
		t.Fatalf("after two processes killed while their login waited: %v; want a login (none of them sent one)", err)
	}
}
