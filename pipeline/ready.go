package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/replica"
)

// Status is everything the readiness depends on, read at one moment.
type Status struct {
	Now time.Time
	// Standby is the hot standby's status; nil without the hot standby.
	Standby *replica.Status

	LastOK       time.Time     // the last verified sweep (zero: none yet)
	LastSlice    time.Time     // the last verified slice of the first sync (zero: none)
	FirstSyncPct int64         // percent of the first sync verified; -1 unknown
	Gap          time.Duration // the current time between sweeps (as stretched by the call budget)

	Pending      plenty.Wait // the wait the service asked for, when PendingOK
	PendingOK    bool
	BlockedUntil time.Time // the pacer's block (zero: none)
	BlockedWhy   string
	ClockProblem string // the last sweep's clock problem ("" none)
	// Unleased: a watcher without the lease does not call the shop while
	// a hot-standby group's replica holds the lease ("" none).
	Unleased string

	LoginHeldUntil time.Time // logins held back until (zero: not held)
	LoginHeldWhy   error

	StateErr      error // the last write to the state file failed
	PublishErr    error // the publisher is not ready (publisher.Ready)
	NATSConnected bool
	NATSCause     string // why the last (re)connection to NATS failed
	NATSURL       string // redacted
	OutboxDepth   int
	OutboxMax     int
}

// Ready says whether the watcher is doing its job: a verified sweep within
// three gaps (as stretched by the call budget), or during the first sync a
// verified slice within that time; the state file writable, NATS
// connected, the outbox below its limit, no clock problem, no wait for the
// service's throttling longer than those three gaps pending, and no pause
// for a spent daily quota ("paused until T: daily quota spent"). A standby
// is ready once it has caught up with the stream (standbyReady).
func Ready(s Status) (bool, string) {
	if s.Standby != nil && !s.Standby.Working {
		return standbyReady(s)
	}
	window := 3 * s.Gap
	if s.Unleased != "" {
		return false, s.Unleased
	}
	if s.PendingOK && s.Pending.Reason == plenty.WaitDailyQuota {
		return false, PausedText(s.Pending)
	}
	if !s.BlockedUntil.IsZero() && s.BlockedUntil.Sub(s.Now) > window {
		return false, fmt.Sprintf("waiting for the service's throttling: no call before %s (%s)", s.BlockedUntil.UTC().Format(time.RFC3339), s.BlockedWhy)
	}
	if s.ClockProblem != "" {
		return false, s.ClockProblem
	}
	first, held := s.FirstSyncPct, loginHeldText(s.LoginHeldUntil, s.LoginHeldWhy)
	switch {
	case s.StateErr != nil:
		return false, s.StateErr.Error()
	case s.LastOK.IsZero() && first >= 0 && first < 100:
		slice := s.LastSlice
		if slice.IsZero() {
			slice = time.Unix(0, 0)
		}
		if since := s.Now.Sub(slice); s.LastSlice.IsZero() || since > max(window, 2*time.Minute) {
			return false, cmp.Or(held, fmt.Sprintf("first sync stalled at %d%%: no progress for %s", first, since.Round(time.Second)))
		}
	case s.LastOK.IsZero():
		return false, cmp.Or(held, "no verified sweep yet")
	case s.Now.Sub(s.LastOK) > window:
		return false, cmp.Or(held, fmt.Sprintf("no verified sweep for %s", s.Now.Sub(s.LastOK).Round(time.Second)))
	}
	switch {
	case s.PublishErr != nil:
		if s.NATSCause != "" && !s.NATSConnected {
			return false, fmt.Sprintf("%v (%s: %s)", s.PublishErr, s.NATSURL, s.NATSCause)
		}
		return false, s.PublishErr.Error()
	case s.OutboxMax > 0 && s.OutboxDepth >= s.OutboxMax:
		return false, "outbox full"
	case s.LastOK.IsZero():
		return true, fmt.Sprintf("first sync in progress: %d%%", first)
	}
	return true, "ok"
}

// standbyReady is the readiness of a replica that does not hold the lease:
// caught up with the stream (so that a rollout of two replicas proceeds),
// the state file writable and NATS connected.
func standbyReady(s Status) (bool, string) {
	r := s.Standby
	switch {
	case r.SetupErr != "":
		return false, "hot standby: the lease buckets cannot be used, so this replica makes no call to the shop (WATCHER_LEASE=false runs without the lease): " + r.SetupErr
	case s.StateErr != nil:
		return false, s.StateErr.Error()
	case !s.NATSConnected:
		return false, "NATS not connected"
	case !r.Mirroring:
		return false, "standby: not mirroring the stream yet"
	case !r.CaughtUp:
		return false, fmt.Sprintf("standby: behind the stream by %d events", r.Lag)
	}
	text := fmt.Sprintf("standby: caught up with the stream; active replica %s", r.Holder)
	if r.Holder == "" {
		text = "standby: caught up with the stream; no replica holds the lease right now"
	}
	if r.Unproven != "" {
		// Ready (a rollout proceeds), but said: a takeover now publishes,
		// for an order changed in the gap, a before of this snapshot.
		text += "; snapshot unproven until the active's next dump: " + r.Unproven
	}
	return true, text
}

// loginHeldText says why the sweeps cannot log in ("login refused until T
// (reason)" after refused credentials), "" when logins are not held back.
func loginHeldText(until time.Time, why error) string {
	if until.IsZero() {
		return ""
	}
	what := "login held back"
	if errors.Is(why, plenty.ErrInvalidCredentials) || errors.Is(why, plenty.ErrUnauthorized) {
		what = "login refused"
	}
	return fmt.Sprintf("%s until %s (%v)", what, until.UTC().Format(time.RFC3339), why)
}

// PausedText is the readiness and state report text of a pending wait.
func PausedText(w plenty.Wait) string {
	return fmt.Sprintf("paused until %s: %s", w.Until.UTC().Format(time.RFC3339), w.Reason.Text())
}

// status reads the watcher's status now: the workers once (a takeover
// replaces them as a whole), the rest from atomics and the components.
func (w *Watcher) status() Status {
	wk := w.work.Load()
	s := Status{
		Now: time.Now(), Gap: time.Duration(w.gap.Load()), FirstSyncPct: w.firstSyncPct.Load(),
		StateErr: w.store.WriteErr(), PublishErr: w.pub.Ready(), NATSConnected: w.nc.IsConnected(), NATSCause: w.host.NATSCause(),
		NATSURL: publisher.RedactURL(w.cfg.NATSURL), OutboxDepth: w.store.OutboxDepth(), OutboxMax: w.cfg.OutboxMax,
	}
	if w.rep != nil {
		rs := w.rep.Status()
		s.Standby = &rs
		if !rs.Working {
			return s
		}
	}
	if t := w.lastOK.Load(); t != 0 {
		s.LastOK = time.Unix(0, t)
	}
	if t := w.lastSlice.Load(); t != 0 {
		s.LastSlice = time.Unix(0, t)
	}
	s.Pending, s.PendingOK = wk.client.Pacer().Pending()
	s.BlockedUntil, s.BlockedWhy = wk.client.Pacer().Blocked()
	s.ClockProblem, _ = w.clockProblem.Load().(string)
	s.Unleased = w.unleasedConflict()
	s.LoginHeldUntil, s.LoginHeldWhy = wk.client.LoginHeld()
	return s
}

// ServiceWait says whether a watcher that is not ready waits only for the
// service (a spent daily quota, the service's throttling beyond three
// gaps, logins held back or refused) while its process does its part
// (state file, NATS, outbox, clock, lease in order): the shop's own
// readiness, not its process's. A process running many shops (a fleet
// member) stays ready for such a shop, so one waiting shop does not block
// a node drain.
func ServiceWait(s Status) bool {
	if s.Standby != nil && !s.Standby.Working {
		return false
	}
	own := s.StateErr == nil && s.PublishErr == nil && s.ClockProblem == "" && s.Unleased == "" &&
		!(s.OutboxMax > 0 && s.OutboxDepth >= s.OutboxMax)
	waits := (s.PendingOK && s.Pending.Reason == plenty.WaitDailyQuota) ||
		(!s.BlockedUntil.IsZero() && s.BlockedUntil.Sub(s.Now) > 3*s.Gap) ||
		(!s.LoginHeldUntil.IsZero() && s.LoginHeldUntil.After(s.Now))
	return own && waits
}

// WaitingForService is ServiceWait of the watcher now.
func (w *Watcher) WaitingForService() bool { return ServiceWait(w.status()) }
