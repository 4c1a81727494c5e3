package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
)

// TestReady: the readiness as a function of the status, one case per rule.
func TestReady(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	// healthy: a verified sweep a second ago, everything fine.
	healthy := func() Status {
		return Status{Now: now, Gap: 5 * time.Second, LastOK: now.Add(-time.Second), FirstSyncPct: 100, NATSConnected: true, OutboxMax: 10, NATSURL: "nats://n:4222"}
	}
	later := now.Add(time.Hour)
	caught := replica.Status{Mirroring: true, CaughtUp: true, Holder: "pod-0"}
	for _, tt := range []struct {
		name   string
		change func(*Status)
		ok     bool
		why    string // the text, or a part of it
	}{
		{"healthy", func(*Status) {}, true, "ok"},
		{"daily quota spent", func(s *Status) {
			s.Pending, s.PendingOK = plenty.Wait{Until: later, Reason: plenty.WaitDailyQuota}, true
		}, false, "paused until 2026-11-26T13:00:00Z: daily quota spent"},
		{"a throttled wait is no pause", func(s *Status) {
			s.Pending, s.PendingOK = plenty.Wait{Until: now.Add(time.Second), Reason: plenty.WaitThrottled}, true
		}, true, "ok"},
		{"blocked longer than three gaps", func(s *Status) { s.BlockedUntil, s.BlockedWhy = now.Add(16*time.Second), "429" }, false,
			"waiting for the service's throttling: no call before 2026-11-26T12:00:16Z (429)"},
		{"blocked within three gaps", func(s *Status) { s.BlockedUntil = now.Add(14 * time.Second) }, true, "ok"},
		{"clock problem", func(s *Status) { s.ClockProblem = "clock: empty window" }, false, "clock: empty window"},
		{"state file not writable", func(s *Status) { s.StateErr = errors.New("disk full") }, false, "disk full"},
		{"no verified sweep yet", func(s *Status) { s.LastOK, s.FirstSyncPct = time.Time{}, -1 }, false, "no verified sweep yet"},
		{"no verified sweep, login refused", func(s *Status) {
			s.LastOK, s.FirstSyncPct = time.Time{}, -1
			s.LoginHeldUntil, s.LoginHeldWhy = later, fmt.Errorf("login: %w", plenty.ErrInvalidCredentials)
		}, false, "login refused until 2026-11-26T13:00:00Z"},
		{"no verified sweep, login held back", func(s *Status) {
			s.LastOK, s.FirstSyncPct = time.Time{}, -1
			s.LoginHeldUntil, s.LoginHeldWhy = later, plenty.ErrSessionLimit
		}, false, "login held back until"},
		{"last sweep too old", func(s *Status) { s.LastOK = now.Add(-16 * time.Second) }, false, "no verified sweep for 16s"},
		{"first sync moving", func(s *Status) { s.LastOK, s.FirstSyncPct, s.LastSlice = time.Time{}, 40, now.Add(-time.Minute) }, true,
			"first sync in progress: 40%"},
		{"first sync stalled", func(s *Status) { s.LastOK, s.FirstSyncPct, s.LastSlice = time.Time{}, 40, now.Add(-3*time.Minute) }, false,
			"first sync stalled at 40%: no progress for 3m0s"},
		{"first sync without a slice", func(s *Status) { s.LastOK, s.FirstSyncPct = time.Time{}, 0 }, false, "first sync stalled at 0%"},
		{"NATS down with its cause", func(s *Status) {
			s.PublishErr, s.NATSConnected, s.NATSCause = errors.New("NATS not connected"), false, "connection refused"
		}, false, "NATS not connected (nats://n:4222: connection refused)"},
		{"publishing failing", func(s *Status) { s.PublishErr, s.NATSCause = errors.New("publishing failing"), "old" }, false, "publishing failing"},
		{"outbox full", func(s *Status) { s.OutboxDepth = 10 }, false, "outbox full"},
		{"no outbox limit", func(s *Status) { s.OutboxDepth, s.OutboxMax = 10, 0 }, true, "ok"},
		{"active replica: the pipeline's rules", func(s *Status) { s.Standby = &replica.Status{Working: true}; s.OutboxDepth = 10 }, false, "outbox full"},
		{"standby caught up", func(s *Status) { s.Standby = &caught; s.LastOK = time.Time{} }, true,
			"standby: caught up with the stream; active replica pod-0"},
		{"standby, nobody holds the lease", func(s *Status) { st := caught; st.Holder = ""; s.Standby = &st }, true,
			"no replica holds the lease right now"},
		{"standby with an unproven snapshot: ready, and said", func(s *Status) {
			st := caught
			st.Unproven = "the stream ORDERS was deleted and created again"
			s.Standby = &st
		}, true, "active replica pod-0; snapshot unproven until the active's next dump: the stream ORDERS was deleted and created again"},
		{"standby behind", func(s *Status) { st := caught; st.CaughtUp, st.Lag = false, 7; s.Standby = &st }, false, "standby: behind the stream by 7 events"},
		{"standby not mirroring", func(s *Status) { st := caught; st.Mirroring = false; s.Standby = &st }, false, "standby: not mirroring the stream yet"},
		{"standby without NATS", func(s *Status) { s.Standby, s.NATSConnected = &caught, false }, false, "NATS not connected"},
		{"standby, state file not writable", func(s *Status) { s.Standby, s.StateErr = &caught, errors.New("read-only") }, false, "read-only"},
		{"standby, buckets unusable", func(s *Status) { st := caught; st.SetupErr = "no JetStream"; s.Standby = &st }, false,
			"hot standby: the lease buckets cannot be used"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := healthy()
			tt.change(&s)
			ok, why := Ready(s)
			if ok != tt.ok || !strings.Contains(why, tt.why) {
				t.Errorf("Ready = %v, %q; want %v, %q", ok, why, tt.ok, tt.why)
			}
		})
	}
}

// TestServiceWait: a watcher that only waits for the service (a spent
// daily quota, the service's throttling, logins held back) while its
// process does its part is the shop's own unreadiness; any fault of the
// process is not.
func TestServiceWait(t *testing.T) {
	now := time.Now()
	quota := Status{Now: now, Gap: time.Second, PendingOK: true, Pending: plenty.Wait{Reason: plenty.WaitDailyQuota, Until: now.Add(time.Hour)}}
	throttled := Status{Now: now, Gap: time.Second, BlockedUntil: now.Add(time.Minute)}
	login := Status{Now: now, Gap: time.Second, LoginHeldUntil: now.Add(time.Minute), LoginHeldWhy: plenty.ErrInvalidCredentials}
	withStateErr := quota
	withStateErr.StateErr = errors.New("disk full")
	full := throttled
	full.OutboxMax, full.OutboxDepth = 10, 10
	for _, c := range []struct {
		name string
		s    Status
		want bool
	}{
		{"daily quota", quota, true},
		{"throttled beyond three gaps", throttled, true},
		{"logins held back", login, true},
		{"nothing pending", Status{Now: now, Gap: time.Second}, false},
		{"a quota and a state file error", withStateErr, false},
		{"throttled and the outbox full", full, false},
	} {
		if got := ServiceWait(c.s); got != c.want {
			t.Errorf("%s: ServiceWait = %v, want %v", c.name, got, c.want)
		}
	}
}
