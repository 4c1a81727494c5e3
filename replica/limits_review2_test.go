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

// killedWithUnwrittenWait has the active a told to wait by the service
// (an hour) while every write of the group's limits fails, then (after
// before, when set) kills it: a's state file keeps the wait, the group
// lacks it. released: a's buckets on a connection of their own (its
// stop releases the lease; its last checkpoint is written); else on a's
// (the kill leaves the lease live and writes no checkpoint).
func (g *group) killedWithUnwrittenWait(released bool, before func()) (path string, w plenty.Wait) {
	t := g.t
	t.Helper()
	var faults *faultyKV
	g.configure = func(n string, c *replica.Config) {
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
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	g.configure = nil
	faults.failWrites.Store(1 << 20)
	w = plenty.Wait{Until: time.Now().Add(time.Hour), Reason: plenty.WaitThrottled, Why: "429 whose group write failed before the kill", Measured: time.Now(), Announced: time.Hour}
	_ = plenty.SaveWait(a.rep.Records(a.store), w)
	if strings.Contains(g.limits(), w.Why) {
		t.Fatal("the wait reached the group: the fault did not hold")
	}
	if before != nil {
		before()
	}
	path = a.store.Path()
	a.kill()
	_ = a.store.Close()
	return path, w
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
