package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestUnprovenStandbyIsReported: a standby whose stream was deleted and
// created again cannot prove its snapshot: its status, its part of the
// state report and the gauge orderwatch_standby_unproven say so.
func TestUnprovenStandbyIsReported(t *testing.T) {
	g := newGroup(t)
	g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring && b.rep.Status().CaughtUp })
	if got := metric(t, b, "orderwatch_standby_unproven"); got != 0 {
		t.Fatalf("orderwatch_standby_unproven = %v before the stream was created again", got)
	}
	ctx := context.Background()
	if err := g.js.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}
	if _, err := g.js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"orders.>"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's snapshot unproven", func() bool { return b.rep.Status().Unproven != "" })
	if rep := b.rep.Report(); rep.Unproven == "" {
		t.Errorf("b's report does not say its snapshot is unproven: %+v", rep)
	}
	if got := metric(t, b, "orderwatch_standby_unproven"); got != 1 {
		t.Errorf("orderwatch_standby_unproven = %v, want 1", got)
	}
}

// metric is the value of the member's gauge name (-1 when not found).
func metric(t *testing.T, m *member, name string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
