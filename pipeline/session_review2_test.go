package pipeline

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
)

// kill ends r as kill -9 would for the group: its NATS connections go
// first, so that neither a last checkpoint nor the lease's release
// reaches NATS.
func (r *replicaRun) kill() {
	r.w.host.LeaseConn().Close()
	r.w.host.Conn().Close()
	r.stop()
	<-r.done
}

// restingShop is a shop of 30 orders that change no more (sweeps add no
// event) on the simulator, its URL, a NATS server's and sweeps, which
// waits for n more order searches (who's sweeps).
func restingShop(t *testing.T) (sim *plentysim.Server, url, nats string, sweeps func(who string, n int)) {
	t.Helper()
	sim = plentysim.New(plentysim.Config{Seed: 11})
	sim.Generate(30, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sweeps = func(who string, n int) {
		from := sim.Stats().SearchCalls
		testnats.WaitFor(t, who+" calling the shop", 60*time.Second, func() bool { return sim.Stats().SearchCalls >= from+n })
	}
	return sim, srv.URL, testnats.Start(t).ClientURL(), sweeps
}

// TestKilledAfterANewLoginHandsTheNewSession: the active r0 logs in again
// in a steady sweep (the service ended its session: 401), the sweeps add
// no event, and r0 is killed a few sweeps later, within CheckpointEvery
// (10 s) of its last checkpoint. r1, taking over, goes on with r0's new
// session: two logins in all. Before, a sweep without events skipped its
// checkpoint, the new sealed session reached no checkpoint, and r1
// opened the ended one, was refused (401) and logged in a third time.
func TestKilledAfterANewLoginHandsTheNewSession(t *testing.T) {
	sim, srvURL, nats, sweeps := restingShop(t)
	r0 := runReplica(t, testConfig(t, srvURL, nats), "r0")
	testnats.WaitFor(t, "r0 active", 60*time.Second, r0.w.Working)
	sweeps("r0", 3)
	r1 := runReplica(t, testConfig(t, srvURL, nats), "r1")
	testnats.WaitFor(t, "r1 a standby", 60*time.Second, func() bool { return r1.w.rep.Report().Holder != "" })
	sweeps("r0", 2)

	sim.ExpireSessions()
	testnats.WaitFor(t, "r0's new login", 60*time.Second, func() bool { return sim.Stats().LoginCalls == 2 })
	sweeps("r0", 2) // the login's sweep is over, one more
	r0.kill()
	testnats.WaitFor(t, "r1 active", 60*time.Second, r1.w.Working)
	sweeps("r1", 2)
	if s := sim.Stats(); s.LoginCalls != 2 || s.Unauthorized401 != 1 {
		t.Errorf("after r0's new login and kill, r1's takeover: %d logins, %d 401s; want 2 and 1 (r1 goes on with r0's new session)",
			s.LoginCalls, s.Unauthorized401)
	}
}

// TestAtRestCheckpointsAreSkipped: a shop at rest (sweeps without events,
// each saving its budget through the group's limits and the client's
// session untouched) writes its checkpoint every CheckpointEvery (10 s),
// not after every sweep (1 s): what makes a checkpoint due besides events
// (a sealed session saved, a record not yet in the group's limits) is
// not the steady state's.
func TestAtRestCheckpointsAreSkipped(t *testing.T) {
	_, srvURL, url, sweeps := restingShop(t)
	cfg := testConfig(t, srvURL, url)
	r0 := runReplica(t, cfg, "r0")
	testnats.WaitFor(t, "r0 active", 60*time.Second, r0.w.Working)
	sweeps("r0's first", 2)

	kv, err := testnats.JetStream(t, url).KeyValue(t.Context(), cfg.LeaseBucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(t.Context(), jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 6
	sweeps("r0 at rest", n)
	checkpoints := 0
	for {
		select {
		case e := <-w.Updates():
			if e != nil && !strings.HasSuffix(e.Key(), ".limits") {
				checkpoints++
			}
			continue
		default:
		}
		break
	}
	if checkpoints >= n-1 {
		t.Errorf("%d checkpoints in %d sweeps at rest: one a sweep, none skipped", checkpoints, n)
	}
	t.Logf("%d checkpoints in %d sweeps at rest", checkpoints, n)
}
