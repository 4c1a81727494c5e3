package replica_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/replica"
)

const groupWins = "not from WATCHER_START_FROM"

// TestNewStateFileContinuesFromTheGroupLogged: a single replica's state
// file deleted (a new claim) continues from the group's checkpoint, not
// from WATCHER_START_FROM; that used to show only as
// restored_from_group=true. Now a warning says so and names the way to
// start over. A standby that starts with a new file says the same.
func TestNewStateFileContinuesFromTheGroupLogged(t *testing.T) {
	g := newGroup(t)
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	s := g.start("s", &pipeline{}) // a standby with a new file
	waitFor(t, "s mirroring", func() bool { return s.rep.Status().Mirroring })
	a.stop() // releases the lease: the standby takes over; b below then waits
	waitFor(t, "s active", s.working)
	s.stop()
	b := g.start("b", &pipeline{}) // a new file in a's place
	waitFor(t, "b active", b.working)
	if m, _ := b.store.Meta(); !m.Watermark.Equal(wm) {
		t.Errorf("b's watermark %v, want the group's %v", m.Watermark, wm)
	}
	for _, m := range []*member{s, b} {
		if !strings.Contains(m.logs.String(), groupWins) || !strings.Contains(m.logs.String(), "watcher reset") {
			t.Errorf("%s's log does not say that the group's checkpoint wins:\n%s", m.name, m.logs)
		}
	}
	if strings.Contains(a.logs.String(), groupWins) {
		t.Errorf("a's own file said the group's checkpoint wins:\n%s", a.logs)
	}
}

// TestResetStartsTheGroupOver: watcher reset refuses while a replica is
// active (nothing cleared), and with the group stopped clears the
// checkpoint and the snapshot dump under the shop's key and the earlier
// version's; a new state file then starts from its own start.
func TestResetStartsTheGroupOver(t *testing.T) {
	g := newGroup(t)
	ctx := context.Background()
	legacy := lease.Key("https://old.example", stream)
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	obs, err := g.js.ObjectStore(ctx, g.bucket+"_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{g.key, legacy} {
		if _, err := obs.Put(ctx, jetstream.ObjectMeta{Name: k}, bytes.NewReader([]byte("dump"))); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{g.key, legacy}
	rep, err := replica.Reset(ctx, a.nc, g.bucket, keys, replica.ResetOptions{})
	if !errors.Is(err, replica.ErrActive) || rep.Holder.Instance != "a" || !strings.Contains(err.Error(), "a (host h)") {
		t.Fatalf("Reset while a is active: %+v, %v; want ErrActive naming a", rep, err)
	}
	if _, found := g.checkpoint(); !found {
		t.Fatal("a refused reset cleared the checkpoint")
	}
	a.stop()
	rep, err = replica.Reset(ctx, a.nc, g.bucket, keys, replica.ResetOptions{Lease: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Checkpoints, ",") != g.key || strings.Join(rep.Dumps, ",") != g.key+","+legacy {
		t.Errorf("cleared checkpoints %v, dumps %v; want %s's checkpoint and both dumps", rep.Checkpoints, rep.Dumps, g.key)
	}
	if _, found := g.checkpoint(); found {
		t.Error("the checkpoint is still there")
	}
	if _, err := obs.GetInfo(ctx, g.key); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the dump is still there: %v", err)
	}
	b := g.start("b", &pipeline{})
	waitFor(t, "b active", b.working)
	if m, _ := b.store.Meta(); !m.Watermark.IsZero() || strings.Contains(b.logs.String(), groupWins) {
		t.Errorf("b after the reset: watermark %v (want none: its own start)\n%s", m.Watermark, b.logs)
	}
	// Forced, while b is active: cleared although b holds the lease.
	if _, err := replica.Reset(ctx, b.nc, g.bucket, keys, replica.ResetOptions{Force: true}); err != nil {
		t.Errorf("forced Reset: %v", err)
	}
}

// TestResetCarriesTheLegacyLimits: a group leaving an earlier version's
// key at a reset keeps the shop's limits (waits, sessions, budget): they
// are copied to the key it uses next, and the group's own are never
// overwritten.
func TestResetCarriesTheLegacyLimits(t *testing.T) {
	g := newGroup(t)
	ctx := context.Background()
	legacy := lease.Key("https://old.example", stream)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	a.stop()
	kv, err := g.js.KeyValue(ctx, g.bucket+"_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, g.key+".limits"); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, legacy+".limits", []byte(`{"legacy":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Reset(ctx, a.nc, g.bucket, []string{g.key, legacy}, replica.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, g.key+".limits")
	if err != nil || string(e.Value()) != `{"legacy":true}` {
		t.Fatalf("the group's limits after the reset: %v, %v; want the legacy key's", e, err)
	}
	// A second reset does not overwrite what the group has now.
	if _, err := kv.Put(ctx, g.key+".limits", []byte(`{"own":true}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Reset(ctx, a.nc, g.bucket, []string{g.key, legacy}, replica.ResetOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, g.key+".limits"); err != nil || string(e.Value()) != `{"own":true}` {
		t.Errorf("the group's own limits were overwritten: %v, %v", e, err)
	}
}

// TestForcedResetUnderARunningActiveLastsUntilItsNextCheckpoint: a
// forced reset while a replica is active clears the group's checkpoint,
// but the active goes on from its own state file and writes the group's
// checkpoint again, of its own watermark, at its next checkpoint (after
// the next sweep with events, or CheckpointEvery, 10 s, after one
// without) and at its stop: the reset is undone (logged by the active:
// "the group's checkpoint is gone"). A state file in use cannot be
// deleted, so a group starts over only with every replica stopped; the
// README and docs/operations.md say so (-force: only for a holder known
// to be gone).
func TestForcedResetUnderARunningActiveLastsUntilItsNextCheckpoint(t *testing.T) {
	g := newGroup(t)
	ctx := context.Background()
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })

	rep, err := replica.Reset(ctx, b.nc, g.bucket, []string{g.key}, replica.ResetOptions{Force: true})
	if err != nil || rep.Holder.Instance != "a" || strings.Join(rep.Checkpoints, ",") != g.key {
		t.Fatalf("forced Reset while a is active: %+v, %v; want a named and its checkpoint cleared", rep, err)
	}
	if _, found := g.checkpoint(); found {
		t.Fatal("the checkpoint is still there after the reset")
	}
	wm = g.advance(a, wm.Add(time.Minute)) // a's next sweep: its checkpoint is back
	if cp, _ := g.checkpoint(); cp.Instance != "a" {
		t.Errorf("the group's checkpoint after the reset was written by %q, want the running active a", cp.Instance)
	}
	if !strings.Contains(a.logs.String(), "the group's checkpoint is gone") {
		t.Errorf("a's log does not say that it wrote the cleared checkpoint again:\n%s", a.logs)
	}

	if _, err := replica.Reset(ctx, b.nc, g.bucket, []string{g.key}, replica.ResetOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	a.stop() // its last checkpoint: back again
	// b may take over (and write its first checkpoint, of a's watermark,
	// from its mirror) before this reads: either way the reset is undone.
	cp, found := g.checkpoint()
	if !found || (cp.Instance != "a" && cp.Instance != "b") || !strings.Contains(string(cp.State), wm.Format(time.RFC3339)) {
		t.Errorf("the group's checkpoint after a forced reset and a's stop: %+v (found %v); want a's last (or b's first after it), of %v", cp, found, wm)
	}
	waitFor(t, "b active", b.working)
	if m, _ := b.store.Meta(); !m.Watermark.Equal(wm) {
		t.Errorf("b took over at the watermark %v, want the running active's %v: the reset did not hold", m.Watermark, wm)
	}
}
