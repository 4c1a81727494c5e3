package poller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestBusyHoursFromADrainedBucket runs the real Run loop (sweeps, second
// looks, probes, the budget at the default share of the service's default
// daily limit, derived settle and overlap) against the simulator over
// loopback on a simulated clock, in a busy shop (2,000 orders, 20 status
// changes a second, spread over every second) from a drained bucket (day 3
// of a busy week: the bucket was spent), for BUSY_HOURS simulated hours
// (skipped when unset; an hour takes about 15 s), or from a full one with
// BUSY_BUCKET=full (day 1):
//
//	BUSY_HOURS=3 go test -run TestBusyHoursFromADrainedBucket -v ./poller
//
// Every hour must spend at most the share's hour (1/24 of 0.25 x 166,000,
// within 1%: a sweep at the hour's edge), and every change must be
// published; it reports each hour's calls and the p50/p99 of the time from
// a change to the sweep that committed its event (simulated time: a sweep
// takes none here, so this is the pace's part of the detection latency;
// the real binary adds the sweep, the publish and the clock's resolution).
func TestBusyHoursFromADrainedBucket(t *testing.T) {
	hours, _ := strconv.Atoi(os.Getenv("BUSY_HOURS"))
	if hours <= 0 {
		t.Skip("BUSY_HOURS not set")
	}
	e := newEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: dailyLimit}}, poller.Config{})
	start := e.clk.Now()
	e.sim.Generate(2000, start.Add(-48*time.Hour), start.Add(-time.Hour))
	ids := make([]int64, 0, 2000)
	for _, o := range e.sim.Orders() {
		ids = append(ids, o.ID)
	}
	// Changes are made as the clock moves: one every 50 ms of the
	// poller's sleeps, on a random order, to a status never used before
	// (so that two changes between sweeps never cancel out).
	rnd := rand.New(rand.NewPCG(1, 2))
	pending := map[int64][]time.Time{} // order -> its changes not yet published
	changes := 0
	const step = 50 * time.Millisecond
	sleep := func(ctx context.Context, d time.Duration) error {
		for d > 0 {
			s := min(step, d)
			e.clk.Advance(s)
			d -= s
			id := ids[rnd.IntN(len(ids))]
			if _, err := e.sim.SetStatus(id, fmt.Sprintf("%d.%06d", 3+changes/1000000, changes%1000000)); err != nil {
				return err
			}
			pending[id] = append(pending[id], e.clk.Now())
			changes++
		}
		return ctx.Err()
	}
	cfg := e.cfg
	cfg.Sleep = sleep
	p, err := poller.New(e.client, e.store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The first sync first, then the bucket drained, as on day 3.
	if _, err := p.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	budget := poller.NewBudget(0.25)
	if os.Getenv("BUSY_BUCKET") != "full" { // BUSY_BUCKET=full: day 1, the bucket full
		budget.Restore(poller.BudgetState{Level: 0, At: e.clk.Now(), Limit: dailyLimit}, e.clk.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	from := e.clk.Now()
	perHour := make([]int, hours)
	lat := make([][]time.Duration, hours)
	var seq uint64
	var maxGap time.Duration
	var last time.Time
	err = p.Run(ctx, poller.RunConfig{
		CallShare: 0.25, Throttle: e.client.Throttle, Budget: budget, Calls: e.client.Calls,
		Timings: poller.NewTimings(poller.TimingsConfig{Records: e.store}),
		OnSweep: func(st poller.Stats, err error) {
			if err != nil {
				t.Errorf("sweep at %v: %v", st.Start.Sub(from), err)
			}
			h := int(st.Start.Sub(from) / time.Hour)
			if h >= hours {
				cancel()
				return
			}
			if !last.IsZero() {
				maxGap = max(maxGap, st.Start.Sub(last))
			}
			last = st.Start
			perHour[h] += st.Charged
			entries, oerr := e.store.Outbox(seq, 1<<20)
			if oerr != nil {
				t.Fatal(oerr)
			}
			var seqs []uint64
			for _, en := range entries {
				seq = max(seq, en.Seq)
				seqs = append(seqs, en.Seq)
				var ev cloudEvent
				if err := json.Unmarshal(en.Payload, &ev); err != nil {
					t.Fatal(err)
				}
				for _, at := range pending[ev.Data.OrderID] {
					lat[h] = append(lat[h], st.Start.Sub(at))
				}
				delete(pending, ev.Data.OrderID)
			}
			if err := e.store.DeleteOutbox(seqs...); err != nil {
				t.Fatal(err)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	share := 0.25 * dailyLimit / 24
	for h := range hours {
		l := lat[h]
		slices.Sort(l)
		p50, p99 := pct(l, 0.50), pct(l, 0.99)
		t.Logf("hour %d: %d calls (share %.0f), %d changes published, p50 %v, p99 %v", h+1, perHour[h], share, len(l), p50, p99)
		if float64(perHour[h]) > share*1.01 {
			t.Errorf("hour %d spent %d calls; want at most the share's %.0f", h+1, perHour[h], share)
		}
	}
	// Every change older than the last seconds has its event.
	late := 0
	for id, ats := range pending {
		if ats[0].Before(e.clk.Now().Add(-time.Minute)) {
			late++
			if late < 5 {
				t.Errorf("order %d changed at %v has no event", id, ats[0].Sub(from))
			}
		}
	}
	t.Logf("%d changes in %d simulated hours, longest gap between sweeps %v, %d orders without their event older than a minute", changes, hours, maxGap, late)
}

func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}
