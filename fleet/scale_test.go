package fleet

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestFleetScale measures a fleet of three members in this process over
// FLEET_SCALE_SHOPS simulated shops at the default limits and the default
// configuration (skipped when unset): CPU and memory per idle shop (the
// simulator and the NATS server run in the same process and are
// included), calls per shop per minute, NATS messages per second, the
// time from a change in the shop to its event in NATS (p50, p99), and
// after one member is killed the time until each of its shops has its
// first call on another member (p50, p99, max), changes lost, events
// doubled, overlapping calls.
func TestFleetScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FLEET_SCALE_SHOPS"))
	if n <= 0 {
		t.Skip("FLEET_SCALE_SHOPS not set")
	}
	idle := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FLEET_SCALE_IDLE")); err == nil {
		idle = d
	}
	w := newWorld(t, n)
	runtime.GC()
	var mw runtime.MemStats
	runtime.ReadMemStats(&mw) // the simulator's and the NATS server's share
	ms := []*member{w.start("m0"), w.start("m1"), w.start("m2")}
	started := time.Now()
	waitStable(t, ms, n, 10*time.Minute)
	t.Logf("%d shops on 3 members: stable after %v", n, time.Since(started).Round(time.Millisecond))
	// A measurement, not a wait for a condition: the first syncs' dumps
	// and checkpoints are behind, the idle period starts clean.
	time.Sleep(5 * time.Second)

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := cpuTime()
	vz0, _ := w.ns.Varz(nil)
	from := time.Now()
	time.Sleep(idle)
	wall := time.Since(from)
	cpu := cpuTime() - cpu0
	vz1, _ := w.ns.Varz(nil)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	calls := 0
	for _, cs := range w.callsSince(from) {
		calls += len(cs)
	}
	perShopMin := float64(calls) / float64(n) / wall.Minutes()
	t.Logf("idle %v: CPU %.2f%% of one core per shop (%.3f cores for %d shops, simulator and NATS server included); heap in use %.1f MiB, %.1f MiB before the members started (%.0f KiB per shop for the members); goroutines %d",
		wall.Round(time.Second), 100*cpu.Seconds()/wall.Seconds()/float64(n), cpu.Seconds()/wall.Seconds(), n,
		float64(m1.HeapInuse)/(1<<20), float64(mw.HeapInuse)/(1<<20), float64(m1.HeapInuse-min(mw.HeapInuse, m1.HeapInuse))/1024/float64(n), runtime.NumGoroutine())
	t.Logf("calls per shop: %.1f a minute = %.0f a day (share 0.25 of 166,000 = 41,500); NATS: %.0f messages in/s, %.0f out/s",
		perShopMin, perShopMin*60*24, float64(vz1.InMsgs-vz0.InMsgs)/wall.Seconds(), float64(vz1.OutMsgs-vz0.OutMsgs)/wall.Seconds())

	first := detection(t, w)

	victim := ms[0]
	moved := victim.active()
	probe := w.probeNATS(t)
	killed := time.Now()
	victim.kill()
	second := w.mutate(1)
	waitStable(t, ms[1:], n, 5*time.Minute)
	rtt := probe()
	t.Logf("NATS round trip (a KV get from the test) from the kill until the survivors were stable: %d gets, p50 %v, p99 %v, max %v",
		len(rtt), pct(rtt, 50), pct(rtt, 99), pct(rtt, 100))
	w.waitEvents(append(first, second...), 2*time.Minute)
	var took []time.Duration
	churn := 0 // moved shops called by both survivors after the kill
	after := w.callsSince(killed)
	for _, id := range moved {
		by := map[string]bool{}
		for _, c := range after[id] {
			if m := agentMember(c.Agent); m != victim.name {
				if len(by) == 0 {
					took = append(took, c.Start.Sub(killed))
				}
				by[m] = true
			}
		}
		if len(by) > 1 {
			churn++
		}
	}
	slices.Sort(took)
	if len(took) != len(moved) {
		t.Fatalf("%d of the %d moved shops called by another member", len(took), len(moved))
	}
	t.Logf("%d of the moved shops moved again between the survivors (rebalancing after the takeover)", churn)
	t.Logf("kill of a member holding %d shops: first call on another member after p50 %v, p99 %v, max %v (lease TTL 9 s); changes lost 0, events doubled 0 (exact event check passed)",
		len(moved), pct(took, 50), pct(took, 99), took[len(took)-1].Round(time.Millisecond))
	for id, cs := range w.callsSince(time.Time{}) {
		tenures(t, id, cs)
	}
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)].Round(time.Millisecond)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// probeNATS times a KV get every 100 ms until the returned stop is
// called, which returns the times sorted: how promptly the server answers
// while the members work.
func (w *world) probeNATS(t *testing.T) (stop func() []time.Duration) {
	kv, err := w.js.KeyValue(t.Context(), "orderwatch_lease")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	out := make(chan []time.Duration)
	go func() {
		var d []time.Duration
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				slices.Sort(d)
				out <- d
				return
			case <-tick.C:
			}
			at := time.Now()
			_, _ = kv.Get(t.Context(), "probe")
			d = append(d, time.Since(at))
		}
	}()
	return func() []time.Duration { close(done); return <-out }
}

// detection makes a change in every shop and logs the time from the
// change to its event on NATS (p50, p99, max); it returns the changes.
func detection(t *testing.T, w *world) []change {
	t.Helper()
	nc := connect(t, w.natsURL)
	defer nc.Close()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	sub, err := nc.Subscribe("orders.>", func(m *nats.Msg) {
		parts := strings.Split(m.Subject, ".")
		mu.Lock()
		seen[parts[1]+"/"+parts[len(parts)-1]] = time.Now()
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	changed := time.Now()
	first := w.mutate(0)
	w.waitEvents(first, 2*time.Minute)
	var lat []time.Duration
	mu.Lock()
	for _, c := range first {
		if at, ok := seen[fmt.Sprintf("%s/%d", c.shop, c.order)]; ok {
			lat = append(lat, at.Sub(changed))
		}
	}
	mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		t.Logf("detection of a change (change to event on NATS), %d shops: p50 %v, p99 %v, max %v", len(lat),
			pct(lat, 50), pct(lat, 99), lat[len(lat)-1].Round(time.Millisecond))
	}
	return first
}
