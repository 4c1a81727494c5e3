package mirror_test

import (
	"context"
	"testing"
	"time"
)

// TestWholeStreamPurgedLeavesTheSnapshotUnproven: the stream is purged
// (every message) before the standby read the last events: its snapshot
// misses them and is unproven until a dump covers the stream, whether
// the standby looks again from the start (CatchUp) or while it follows.
func TestWholeStreamPurgedLeavesTheSnapshotUnproven(t *testing.T) {
	s, a, b := groupWithStandby(t)
	ctx := context.Background()
	prev := orderState("5", t0)
	for i := range 3 {
		next := orderState("6", t0.Add(time.Duration(i+1)*time.Minute))
		change(t, a, 7, prev, next, true)
		prev = next
	}
	str, err := operator(t, s).Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if err := str.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if b.m.Unproven() == "" {
		t.Fatal("b missed the 3 events the purge removed and calls its snapshot proven")
	}
	dumpProvesAgain(t, a, b, prev) // a dump taken after the purge
}

// TestPurgeWhileFollowingLeavesTheSnapshotUnproven: the standby follows
// the stream (Run) when the stream is purged with events it has not
// read: it notices while it follows.
func TestPurgeWhileFollowingLeavesTheSnapshotUnproven(t *testing.T) {
	s, a, b := groupWithStandby(t)
	ctx := context.Background()
	str, err := operator(t, s).Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	// b's position is behind: events it has not applied yet are purged
	// before it reads them (the consumer of Run starts after the purge).
	prev := orderState("5", t0)
	next := orderState("6", t0.Add(time.Minute))
	change(t, a, 7, prev, next, true)
	if err := str.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = b.m.Run(rctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "b unproven", 10*time.Second, func() bool { return b.m.Unproven() != "" })
}
