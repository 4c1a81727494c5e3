package fleet

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestFleetProcessScale measures FLEET_PROCESS_SHOPS simulated shops on
// three processes of the real binary in fleet mode (skipped when unset;
// the simulator and the NATS server run in the test process): the time
// until every shop is active, CPU and memory (RSS) per idle shop per
// process over FLEET_PROCESS_IDLE [60s], calls per shop per day, the time
// from a change to its event on NATS (p50, p99), and after SIGKILL of the
// busiest process the time until each of its shops has its first call on
// another process (p50, p99, max), with the exact event check (no change
// lost, no event doubled) and the check that no shop is called by two
// processes at once, and where the takeover's time went (from the test's
// watch of the lease bucket: the lease gone, acquired elsewhere, the first
// call) with the lease renewals as the server received them.
// FLEET_PROCESS_SPIN=n starts n processes spinning on the cores once every
// shop is active, until the end (other work loading the machine during the
// idle window, the kill and the takeover); FLEET_PROCESS_LOGS=dir keeps the
// processes' logs (warnings and errors; FLEET_PROCESS_LOG_LEVEL=info keeps
// more) there.
func TestFleetProcessScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FLEET_PROCESS_SHOPS"))
	if n <= 0 {
		t.Skip("FLEET_PROCESS_SHOPS not set")
	}
	idle := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FLEET_PROCESS_IDLE")); err == nil {
		idle = d
	}
	bin := e2e.Watcher(t)
	w := newWorld(t, n)
	t.Logf("load average at start: %s", loadAvg())
	started := time.Now()
	ps := []*proc{w.startProcess(bin, "p0"), w.startProcess(bin, "p1"), w.startProcess(bin, "p2")}
	if dir := os.Getenv("FLEET_PROCESS_LOGS"); dir != "" {
		t.Cleanup(func() { // also when the test failed
			for _, p := range ps {
				_ = os.WriteFile(filepath.Join(dir, p.name+".log"), []byte(p.log.String()), 0o644)
			}
		})
	}
	waitEvery(t, "every shop active on one of three processes", 15*time.Minute, func() bool { return spread(ps, n) })
	t.Logf("%d shops on 3 processes: every shop active (its first sync done) and every process ready after %v",
		n, time.Since(started).Round(time.Millisecond))
	tl := followTakeovers(t, w)
	spin(t)
	// A measurement, not a wait for a condition: the first syncs' dumps
	// and checkpoints are behind, the idle period starts clean.
	time.Sleep(5 * time.Second)

	cpu0 := map[*proc]time.Duration{}
	for _, p := range ps {
		cpu0[p] = procCPU(t, p)
	}
	from := time.Now()
	time.Sleep(idle)
	wall := time.Since(from)
	for _, p := range ps {
		shops := len(p.active())
		cpu := procCPU(t, p) - cpu0[p]
		rss := procRSS(t, p)
		t.Logf("%s idle %v: %d shops, CPU %.3f cores (%.3f%% of one core per shop), RSS %.1f MiB (%.0f KiB per shop)", p.name,
			wall.Round(time.Second), shops, cpu.Seconds()/wall.Seconds(), 100*cpu.Seconds()/wall.Seconds()/float64(max(shops, 1)),
			float64(rss)/(1<<20), float64(rss)/1024/float64(max(shops, 1)))
	}
	calls := 0
	for _, cs := range w.callsSince(from) {
		calls += len(cs)
	}
	perShopMin := float64(calls) / float64(n) / wall.Minutes()
	t.Logf("calls per shop: %.1f a minute = %.0f a day (share 0.25 of 166,000 = 41,500); load average %s", perShopMin, perShopMin*60*24, loadAvg())

	before := detection(t, w)

	victim, survivors := busiest(ps, (*proc).active)
	moved := victim.active()
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range survivors {
				rep := p.report()
				t.Logf("%s at the end: ready %v, counts %v, shops by state and reason: %v", p.name, rep.Ready, rep.Counts, byState(rep))
			}
		}
	})
	after := w.mutate(1)
	waitEvery(t, "the killed process's shops on the other two", 10*time.Minute, func() bool { return spread(survivors, n) })
	w.waitEvents(append(before, after...), 2*time.Minute)
	var took []time.Duration
	// A request the killed process sent before the kill may reach the
	// simulator's handler (which stamps Start) a little later on a loaded
	// machine: one whose Start is within inFlight of the kill is counted
	// apart; a later one would be a call after the kill.
	const inFlight = time.Second
	byVictim, atKill := 0, 0
	calls2 := w.callsSince(killed)
	for id, cs := range calls2 {
		for _, c := range cs {
			switch {
			case agentMember(c.Agent) != victim.name || !c.Start.After(killed):
			case c.Start.Before(killed.Add(inFlight)):
				atKill++
			default:
				byVictim++
				t.Errorf("shop %s called by the killed process %v after the kill", id, c.Start.Sub(killed))
			}
		}
	}
	firstCall := map[string]time.Time{}
	for _, id := range moved {
		for _, c := range calls2[id] {
			if agentMember(c.Agent) != victim.name {
				took = append(took, c.Start.Sub(killed))
				firstCall[id] = c.Start
				break
			}
		}
	}
	slices.Sort(took)
	if len(took) != len(moved) || len(moved) == 0 {
		t.Fatalf("%d of the %d shops of the killed process called by another", len(took), len(moved))
	}
	overlapping := 0
	for id, cs := range w.callsSince(time.Time{}) {
		_, o := splitTenures(id, cs)
		for _, e := range o {
			t.Error(e)
		}
		overlapping += len(o)
	}
	t.Logf("kill -9 of %s holding %d shops: first call on another process after p50 %v, p99 %v, max %v (lease TTL 9 s); changes lost 0, events doubled 0 (exact event check passed); calls by the killed process after the kill %d (%d sent before it, handled within %v after it); calls overlapping another process's %d; load average %s",
		victim.name, len(moved), pct(took, 50), pct(took, 99), took[len(took)-1].Round(time.Millisecond), byVictim, atKill, inFlight, overlapping, loadAvg())
	t.Logf("lease renewals (server's view) before the kill: %s; after it, the survivors': %s", tl.renewals(time.Time{}, killed, ""), tl.renewals(killed, time.Now(), victim.name))
	t.Logf("where the takeover's time went (server's view of the lease bucket): %s", tl.report(moved, "ORDERS", victim.name, killed, firstCall))
	for _, p := range ps {
		l := p.log.String()
		t.Logf("%s log (warnings and errors): %d lines, %d \"cannot be reached yet\", %d \"maximum consumers\"; most frequent: %s", p.name, strings.Count(l, "\n"),
			strings.Count(l, "cannot be reached yet"), strings.Count(l, "maximum consumers"), frequent(l, 4))
	}
}

// byState counts a member's shops by state and reason.
func byState(rep Report) map[string]int {
	out := map[string]int{}
	for _, s := range rep.Shops {
		out[s.State+" "+s.Reason]++
	}
	return out
}

// frequent names the n most frequent messages of a log (JSON or text
// lines) with their counts.
func frequent(log string, n int) string {
	re := regexp.MustCompile(`"msg":"([^"]*)"|msg="([^"]*)"`)
	count := map[string]int{}
	for line := range strings.Lines(log) {
		if m := re.FindStringSubmatch(line); m != nil {
			count[m[1]+m[2]]++
		}
	}
	msgs := slices.Collect(maps.Keys(count))
	slices.SortFunc(msgs, func(a, b string) int { return count[b] - count[a] })
	var out []string
	for _, m := range msgs[:min(n, len(msgs))] {
		out = append(out, fmt.Sprintf("%d× %q", count[m], m))
	}
	return strings.Join(out, ", ")
}

// waitEvery is e2e.WaitFor at a gentler pace: a report of a thousand
// shops from three processes is not free.
func waitEvery(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	testnats.WaitForEvery(t, what, limit, time.Second, cond)
}

// procCPU is the user and system time of a process (Linux /proc).
func procCPU(t *testing.T, p *proc) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is the 3rd
	// field, utime the 14th, stime the 15th (clock ticks, 100 a second).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procRSS is the resident memory of a process in bytes (Linux /proc).
func procRSS(t *testing.T, p *proc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// spin starts FLEET_PROCESS_SPIN processes spinning on the cores until the
// test ends.
func spin(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FLEET_PROCESS_SPIN"))
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	if n > 0 {
		t.Logf("%d processes spinning on the cores from now on", n)
	}
}
