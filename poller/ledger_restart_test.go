package poller_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// damagedLedger is the start of the warning a restored read ledger that
// claims reads beyond the service's clock evidence is logged with.
const damagedLedger = "the read ledger claims reads beyond the service's clock evidence"

// logCounter counts the log lines that contain a text (a log written by
// the goroutines of Run: atomic), and writes them to the test's log (-v).
type logCounter struct {
	t    *testing.T
	text string
	n    *atomic.Int64
}

func (w logCounter) Write(b []byte) (int, error) {
	if strings.Contains(string(b), w.text) {
		w.n.Add(1)
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

func loadLedger(t *testing.T, e *env) poller.Ledger {
	t.Helper()
	var l poller.Ledger
	if found, err := e.store.LoadRecord(poller.LedgerRecord, &l); err != nil || !found {
		t.Fatalf("no read ledger in the state file (found %v): %v", found, err)
	}
	return l
}

// lostClaims returns the seconds that before claims were read at a
// promised age and the state file's ledger now claims at a lower one (or
// not at all): what the process reads again.
func lostClaims(e *env, before poller.Ledger) []string {
	var lost []string
	for x := before.Floor.Add(-10 * time.Minute); x.Before(before.Floor); x = x.Add(time.Second) {
		if age, ok := poller.ClaimedAge(e.store, x); !ok || age < before.FloorAge {
			lost = append(lost, x.Format(time.TimeOnly)+"@"+before.FloorAge.String()+" (below the floor)")
		}
	}
	for _, s := range before.Spans {
		if s.Age <= 0 {
			continue // read at no promised age: nothing to keep
		}
		for x := s.From; x.Before(s.To); x = x.Add(time.Second) {
			if age, ok := poller.ClaimedAge(e.store, x); !ok || age < s.Age {
				lost = append(lost, x.Format(time.TimeOnly)+"@"+s.Age.String())
			}
		}
	}
	return lost
}

// ledgerRun runs a quiet shop through Run at the defaults for sweeps
// sweeps: a new process on the state file each time, its warnings about
// a damaged ledger counted in damaged.
func ledgerRun(t *testing.T, e *env, sweeps int, damaged *atomic.Int64) {
	t.Helper()
	e.cfg.Logger = slog.New(slog.NewTextHandler(logCounter{t, damagedLedger, damaged}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var fail atomic.Bool
	quietRun(t, e, &fail, func(n int, _ poller.Stats) bool { return n >= sweeps })
}

// TestRestartKeepsTheReadLedger: a process restarts on its own state
// file, the read ledger it saved is loaded whole, with no warning of a
// damaged record, for a shop whose stamps lag its Date by an hour (the
// sweeps' windows end at the Date minus settle, an hour above the stamps'
// evidence: seen after every takeover of such shops in a fleet run) and
// for one whose Date is right. Nothing it claimed at a promised age is
// read again.
func TestRestartKeepsTheReadLedger(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dateSkew time.Duration
	}{
		{"stamps an hour behind the Date", time.Hour},
		{"Date right", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, plentysim.Config{Faults: plentysim.Faults{DateSkew: tc.dateSkew}}, poller.Config{})
			e.sim.Generate(50, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
			var damaged atomic.Int64
			ledgerRun(t, e, 200, &damaged)
			before := loadLedger(t, e)
			read := false
			for _, s := range before.Spans {
				read = read || s.Age > 0
			}
			if !read && before.FloorAge == 0 {
				t.Fatalf("the first process claimed no read at a promised age: %+v", before)
			}
			for _, pause := range []time.Duration{0, 3 * time.Second} {
				e.clk.Advance(pause) // the process is down
				ledgerRun(t, e, 1, &damaged)
			}
			if n := damaged.Load(); n != 0 {
				t.Errorf("%d restarts of a healthy state file warned of a damaged read ledger (before: %+v)", n, before)
			}
			if lost := lostClaims(e, before); len(lost) > 0 {
				t.Errorf("%d seconds read at a promised age are owed again after the restarts: %v", len(lost), lost[:min(len(lost), 10)])
			}
		})
	}
}

// TestRestartCutsALedgerBeyondTheEvidence: the state file's read ledger
// claims reads two hours ahead of the service's clock (a damaged record:
// the ledger of a shop whose clock is ahead, copied): the restarted
// process warns and claims no read at a promised age that the service's
// evidence does not vouch for; what the record claimed is read again.
func TestRestartCutsALedgerBeyondTheEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, plentysim.Config{}, poller.Config{})
	e.sim.Generate(50, t0.Add(-24*time.Hour), t0.Add(-time.Hour))
	var damaged atomic.Int64
	ledgerRun(t, e, 200, &damaged)
	l := loadLedger(t, e)
	const ahead = 2 * time.Hour
	l.Floor = l.Floor.Add(ahead)
	for i := range l.Spans {
		l.Spans[i].From, l.Spans[i].To = l.Spans[i].From.Add(ahead), l.Spans[i].To.Add(ahead)
	}
	if err := e.store.SaveRecord(poller.LedgerRecord, l); err != nil {
		t.Fatal(err)
	}
	ledgerRun(t, e, 1, &damaged)
	if damaged.Load() != 1 {
		t.Errorf("%d warnings of a damaged read ledger; want 1", damaged.Load())
	}
	// The service's clock is the fake clock: no read began after it.
	now := e.clk.Now()
	meta, err := e.store.Meta()
	if err != nil {
		t.Fatal(err)
	}
	for x := meta.Watermark.Add(-20 * time.Minute); x.Before(now.Add(ahead)); x = x.Add(time.Second) {
		age, ok := poller.ClaimedAge(e.store, x)
		if ok && age > 0 && x.Add(time.Second+age).After(now) {
			t.Fatalf("after the restart, %s is claimed read at %v, beyond the service's clock (%s)", x.Format(time.TimeOnly), age, now.Format(time.TimeOnly))
		}
	}
}
