package fleet

import (
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
)

// proc is a fleet member as a process of the real binary.
type proc struct {
	name, addr string
	cmd        *exec.Cmd
	log        *e2e.LockedBuffer
}

func (w *world) startProcess(bin, name string) *proc {
	w.t.Helper()
	p := &proc{name: name, addr: e2e.FreeAddr(w.t), log: &e2e.LockedBuffer{}}
	p.cmd = exec.Command(bin, "run")
	p.cmd.Env = append(e2e.CleanEnv(),
		"WATCHER_SHOPS_FILE="+w.registry, "WATCHER_STATE_DIR="+filepath.Join(w.t.TempDir(), name),
		"WATCHER_NATS_URL="+w.natsURL, "WATCHER_HTTP_ADDR="+p.addr, "WATCHER_INSTANCE_ID="+name,
		"WATCHER_LOG_LEVEL="+cmp.Or(os.Getenv("FLEET_PROCESS_LOG_LEVEL"), "warn"), "SHOP_PW=demo")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		_ = p.cmd.Wait()
	})
	return p
}

// report is the process's /state (zero when it does not answer).
func (p *proc) report() Report {
	var rep Report
	if code, body := e2e.Get("http://" + p.addr + "/state"); code == 200 {
		_ = json.Unmarshal([]byte(body), &rep)
	}
	return rep
}

func (p *proc) active() []string {
	var out []string
	for _, s := range p.report().Shops {
		if s.State == StateActive {
			out = append(out, s.ID)
		}
	}
	return out
}

// spread says whether every process is ready and every shop active on
// exactly one of them, each within the fair share.
func spread(ps []*proc, n int) bool {
	seen := map[string]bool{}
	for _, p := range ps {
		rep := p.report()
		if !rep.Ready {
			return false // a first sync in progress, say
		}
		var act []string
		for _, s := range rep.Shops {
			if s.State == StateActive && s.Reason == "ok" { // "ok": a verified sweep, the first sync done
				act = append(act, s.ID)
			}
		}
		if len(act) > Share(n, len(ps)) {
			return false
		}
		for _, id := range act {
			if seen[id] {
				return false
			}
			seen[id] = true
		}
	}
	return len(seen) == n
}

// TestFleetProcessKilled: three watcher processes in fleet mode share six
// shops; one is killed with SIGKILL; the other two take its shops over
// with their state (each change published once, nothing else) and no
// shop is ever called by two processes at once.
func TestFleetProcessKilled(t *testing.T) {
	t.Parallel()
	bin := e2e.Watcher(t)
	const n = 6
	w := newWorld(t, n)
	ps := []*proc{w.startProcess(bin, "p0"), w.startProcess(bin, "p1"), w.startProcess(bin, "p2")}
	e2e.WaitFor(t, "six shops spread over three processes", 90*time.Second, func() bool { return spread(ps, n) })
	before := w.mutate(0)
	w.waitEvents(before, 30*time.Second)

	victim, survivors := busiest(ps, (*proc).active)
	moved := victim.active()
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	after := w.mutate(1)
	e2e.WaitFor(t, "the killed process's shops on the other two", 90*time.Second, func() bool { return spread(survivors, n) })
	w.waitEvents(append(before, after...), 30*time.Second)

	calls := w.callsSince(killed)
	var took []time.Duration
	for _, id := range moved {
		for _, c := range calls[id] {
			if agentMember(c.Agent) != victim.name {
				took = append(took, c.Start.Sub(killed))
				break
			}
		}
	}
	slices.Sort(took)
	if len(took) != len(moved) || len(moved) == 0 {
		t.Fatalf("%d of the %d shops of the killed process called by another", len(took), len(moved))
	}
	t.Logf("kill -9 of a process holding %d shops: first call on another process after %v .. %v (lease TTL 9 s)",
		len(moved), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	for id, cs := range w.callsSince(time.Time{}) {
		tenures(t, id, cs)
	}
}
