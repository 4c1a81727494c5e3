package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// replicaRun is a pipeline with the hot standby running in the test.
type replicaRun struct {
	w    *Watcher
	stop context.CancelFunc
	done chan struct{}
}

// runReplica runs the pipeline of cfg with the lease on, as instance,
// until stop or the end of the test.
func runReplica(t *testing.T, cfg *Config, instance string) *replicaRun {
	t.Helper()
	return runReplicaWith(t, cfg, instance, replica.Tuning{})
}

// runReplicaWith is runReplica with the replica's tuning (Tick and Retry
// 50 ms unless set).
func runReplicaWith(t *testing.T, cfg *Config, instance string, tuning replica.Tuning) *replicaRun {
	t.Helper()
	return runReplicaLogged(t, cfg, instance, tuning, quiet())
}

// runReplicaLogged is runReplicaWith logging to log.
func runReplicaLogged(t *testing.T, cfg *Config, instance string, tuning replica.Tuning, log *slog.Logger) *replicaRun {
	t.Helper()
	cfg.Lease, cfg.InstanceID = true, instance
	tuning.Tick, tuning.Retry = cmp.Or(tuning.Tick, 50*time.Millisecond), cmp.Or(tuning.Retry, 50*time.Millisecond)
	w, err := New(cfg, Options{Logger: log, Replica: tuning})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicaRun{w: w, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// TestTakenOverShopKeepsItsSession: a shop handed from replica to replica
// five times within a token's life, each replica on a new state file (a
// fleet member on an empty state directory, a pod of the chart's default
// emptyDir), makes one login in all with the service's default of 3
// sessions, and each new active's calls go on. Before, each takeover
// logged in: the fourth was refused (too_many_concurrent_sessions) and
// the shop was not polled.
func TestTakenOverShopKeepsItsSession(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 11})
	sim.Generate(30, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	nats := testnats.Start(t).ClientURL()
	start := func(instance string) *replicaRun {
		return runReplica(t, testConfig(t, srv.URL, nats), instance) // a state file of its own
	}
	// sweeps waits for n more order searches (the active's calls go on;
	// its checkpoints, which carry the sealed session, are written).
	sweeps := func(who string, n int) {
		from := sim.Stats().SearchCalls
		testnats.WaitFor(t, who+" calling the shop", 30*time.Second, func() bool { return sim.Stats().SearchCalls >= from+n })
	}
	cur := start("r0")
	testnats.WaitFor(t, "r0 active", 60*time.Second, cur.w.Working)
	sweeps("r0", 3)
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("r%d", i)
		next := start(name)
		testnats.WaitFor(t, name+" a standby", 60*time.Second, func() bool { return next.w.rep.Report().Holder != "" })
		cur.stop()
		<-cur.done // released
		testnats.WaitFor(t, name+" active", 60*time.Second, next.w.Working)
		sweeps(name, 3)
		cur = next
	}
	if s := sim.Stats(); s.LoginCalls != 1 || s.SessionLimit429 != 0 || s.MaxConcurrentSessions != 1 || s.Unauthorized401 != 0 {
		t.Errorf("after 5 takeovers: %d logins, %d session-limit 429s, at most %d sessions, %d 401s; want 1, 0, 1, 0",
			s.LoginCalls, s.SessionLimit429, s.MaxConcurrentSessions, s.Unauthorized401)
	}
	// The state report shows neither the token nor its sealed copy.
	tok, err := cur.w.store.LoadToken(t.Context())
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("the last active's token: %v", err)
	}
	var sealed struct{ Box []byte }
	if found, err := cur.w.store.LoadRecord(plenty.SealedSessionRecord, &sealed); !found || err != nil || len(sealed.Box) == 0 {
		t.Fatalf("the last active's record %s: found %v, %v", plenty.SealedSessionRecord, found, err)
	}
	rep, err := NewReport(cur.w.store, cur.w.cfg.StartFrom)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rep)
	box, _ := json.Marshal(sealed.Box)
	for what, s := range map[string]string{"the token": tok.AccessToken, "the refresh token": tok.RefreshToken,
		"the sealed session": strings.Trim(string(box), `"`), "its record": plenty.SealedSessionRecord} {
		if s != "" && strings.Contains(string(b), s) {
			t.Errorf("the state report holds %s: %s", what, b)
		}
	}
}

// TestCheckUsesTheSessionHandedOver: `watcher check` on a state file that
// holds no token of its own but the shop's sealed session (restored from
// the group) makes no login and says where the session came from.
func TestCheckUsesTheSessionHandedOver(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 12})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	cfg := testConfig(t, srv.URL, testnats.Start(t).ClientURL())
	other, err := state.Open(filepath.Join(t.TempDir(), "other.db"), state.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := plenty.New(plenty.Config{BaseURL: srv.URL, Username: "demo", Password: "demo", Tokens: other, Sessions: other})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Login(t.Context()); err != nil {
		t.Fatal(err)
	}
	ckpt, _, err := other.Checkpoint()
	_ = other.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(cfg.StatePath, state.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = st.RestoreCheckpoint(ckpt, nil)
	_ = st.Close()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	Check(t.Context(), cfg, "test", &out)
	if !strings.Contains(out.String(), "session handed over") || sim.Stats().LoginCalls != 1 {
		t.Errorf("%d logins (want 1: the other process's), check said:\n%s", sim.Stats().LoginCalls, out.String())
	}
}
