package faults

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestFaultUnleasedBesideGroup: a watcher started with WATCHER_LEASE=false
// beside the active replica of a group (same shop, same stream) makes no
// call to the shop while the group's lease is held, and says why on
// /readyz; the active replica goes on alone.
func TestFaultUnleasedBesideGroup(t *testing.T) {
	e := newStandbyEnv(t)
	defer e.dumpLogs()
	r1, r2 := e.reps[0], e.reps[1]
	r1.start()
	waitReady(t, r1.addr)
	e.mutate(20)
	r2.env = append(r2.env, "WATCHER_LEASE=false") // its User-Agent names no instance
	started := time.Now()
	r2.start()
	body := r2.readyText("the watcher without the lease to say why it does not call the shop", 15*time.Second, func(code int, b string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(b, "held by the replica r1")
	})
	time.Sleep(4 * time.Second) // the window: 4 s side by side
	end := time.Now()
	unleased, active := e.callsBy("", started, end), e.callsBy("r1", started, end)
	if unleased != 0 {
		t.Errorf("the watcher without the lease made %d calls in %v beside the active replica (which made %d)", unleased, end.Sub(started).Round(time.Millisecond), active)
	}
	if active == 0 {
		t.Errorf("the active replica made no call in %v", end.Sub(started).Round(time.Millisecond))
	}
	t.Logf("in %v side by side: active r1 %d calls, the watcher without the lease %d; its /readyz: %s", end.Sub(started).Round(time.Millisecond), active, unleased, body)
}
