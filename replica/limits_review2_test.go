package replica_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// TestARestartedSingleReplicasUnwrittenWaitReachesTheGroup: the only
// replica a was told to wait by the service (a 429) while every write of
// the group's limits failed, then was killed: its state file keeps the
// wait (replica.unsent), the group lacks it. Restarted on the same file
// (the group's limits last written by this file), it takes the lease
// again, released by the kill or left live (taken at once by the restart,
// takeOwnStale): the wait binds it and reaches the group (the standby's
// writer at the restart, or the active's once tenured), not dropped as
// nothing to add (adds).
func TestARestartedSingleReplicasUnwrittenWaitReachesTheGroup(t *testing.T) {
	for _, released := range []bool{true, false} {
		name := "lease released"
		if !released {
			name = "lease left live"
		}
		t.Run(name, func(t *testing.T) { restartWithUnwrittenWait(t, released) })
	}
}

// restartWithUnwrittenWait: released: a's buckets on a connection of
// their own (the kill releases the lease); else on a's (the kill leaves
// the lease live).
func restartWithUnwrittenWait(t *testing.T, released bool) {
	g := newGroup(t)
	path, w := g.killedWithUnwrittenWait(released, nil)
	a := g.startOn("a", path, &pipeline{})
	waitFor(t, "a active again", a.working)
	if took := strings.Contains(a.logs.String(), "earlier process on this state file, which is gone"); took == released {
		t.Errorf("the restart took its own live lease: %v, want %v", took, !released)
	}
	waitFor(t, "a's wait in the group's limits", func() bool { return strings.Contains(g.limits(), w.Why) })
	waits, _, err := plenty.LoadWaits(a.store)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(waits, func(have plenty.Wait) bool { return have.Why == w.Why }) {
		t.Errorf("the restarted active's state file lacks the wait the service announced to it: %+v", waits)
	}
}

// killedWithUnwrittenWait is activeWithOwnUnwrittenWait, then (after
// before, when set) a's kill: a's state file keeps the wait, the group
// lacks it.
func (g *group) killedWithUnwrittenWait(released bool, before func()) (path string, w plenty.Wait) {
	g.t.Helper()
	a, w := g.activeWithOwnUnwrittenWait(released, nil)
	if before != nil {
		before()
	}
	path = a.store.Path()
	a.kill()
	_ = a.store.Close()
	return path, w
}

// activeWithOwnUnwrittenWait has the active a (configured by tune too,
// when set) told to wait by the service (an hour) while every write of
// the group's limits fails. released: a's buckets on a connection of
// their own (its stop releases the lease and writes its last
// checkpoint); else on a's (its kill leaves the lease live and writes no
// checkpoint).
func (g *group) activeWithOwnUnwrittenWait(released bool, tune func(*replica.Config)) (a *member, w plenty.Wait) {
	t := g.t
	t.Helper()
	var faults *faultyKV
	g.configure = func(n string, c *replica.Config) {
		if tune != nil {
			tune(c)
		}
		if n != "a" || faults != nil {
			return
		}
		js := g.js
		if !released {
			var err error
			if js, err = jetstream.New(c.NC); err != nil {
				t.Fatal(err)
			}
		}
		b, err := replica.BindBuckets(context.Background(), js, g.bucket, ttl, 1, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		faults = &faultyKV{KeyValue: b.Checkpoints}
		b.Checkpoints = faults
		c.Buckets = b
	}
	a = g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	if tune == nil {
		g.configure = nil
	}
	faults.failWrites.Store(1 << 20)
	w = plenty.Wait{Until: time.Now().Add(time.Hour), Reason: plenty.WaitThrottled, Why: "429 whose group write failed before the kill", Measured: time.Now(), Announced: time.Hour}
	_ = plenty.SaveWait(a.rep.Records(a.store), w)
	if strings.Contains(g.limits(), w.Why) {
		t.Fatal("the wait reached the group: the fault did not hold")
	}
	return a, w
}

// TestARestartedStandbysUnwrittenWaitReachesTheGroup: the active a was
// told to wait by the service while every write of the group's limits
// failed, then was killed; b took over (the group's limits now written
// by b's file, without a's wait). a restarts on its file as a standby:
// its wait adds to the group's (adds) and reaches it while b is active,
// so that b's running client honours it.
func TestARestartedStandbysUnwrittenWaitReachesTheGroup(t *testing.T) {
	g := newGroup(t)
	var b *member
	path, w := g.killedWithUnwrittenWait(false, func() {
		b = g.start("b", &pipeline{})
		waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	})
	waitFor(t, "b active", b.working)
	waitFor(t, "the group's limits written by b", func() bool { return strings.Contains(g.limits(), `"instance":"b"`) })
	if strings.Contains(g.limits(), w.Why) {
		t.Fatal("precondition: a's wait reached the group before its restart")
	}
	g.restartStandby(path)
	waitFor(t, "a's wait in the group's limits", func() bool { return strings.Contains(g.limits(), w.Why) })
}

// TestAnUnwrittenWaitReachesTheCheckpointWithoutAnEvent: the active a is
// told to wait by the service inside a steady sweep while the writes of
// the group's limits fail (a timeout of its limits key, the checkpoint
// still written); the sweep adds no event. Only the checkpoint carries
// the wait to a successor now: it must follow that sweep, not
// CheckpointEvery later (1 h here). Then a dies and b, taking over,
// honours the wait. (Before 26bfcb7 every verified sweep's checkpoint
// carried it.)
func TestAnUnwrittenWaitReachesTheCheckpointWithoutAnEvent(t *testing.T) {
	g := newGroup(t)
	a, w := g.activeWithOwnUnwrittenWait(false, func(c *replica.Config) { c.CheckpointEvery = time.Hour })
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	wm := time.Date(2026, 11, 26, 10, 1, 0, 0, time.UTC)
	if err := a.store.Commit(state.Commit{Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(t, "a's wait in the group's checkpoint", func() bool {
		cp, ok := g.checkpoint()
		return ok && strings.Contains(string(cp.State), w.Why)
	})
	a.kill()
	waitFor(t, "b active", b.working)
	waits, _, err := plenty.LoadWaits(b.store)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(waits, func(have plenty.Wait) bool { return have.Why == w.Why }) {
		t.Errorf("b took over without the wait the service announced to a: %+v", waits)
	}
}
