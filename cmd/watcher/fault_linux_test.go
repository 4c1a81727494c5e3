//go:build linux

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orderwatch/orderwatch/plentysim"
)

// fillDisk makes the watcher's writes fail as on a full disk: its file size
// limit drops to 8 KiB, where bbolt's two meta pages end, so every
// transaction fails writing its first page with EFBIG (a full disk says
// ENOSPC, a read-only filesystem EROFS: the same path in the watcher). It
// needs no root and no mount; clearDisk lifts the limit again.
func (f *faultEnv) fillDisk() {
	f.t.Helper()
	f.setFileLimit(8192)
}

func (f *faultEnv) clearDisk() {
	f.t.Helper()
	f.setFileLimit(unix.RLIM_INFINITY)
}

func (f *faultEnv) setFileLimit(cur uint64) {
	f.t.Helper()
	f.mu.Lock()
	pid := f.proc.Process.Pid
	f.mu.Unlock()
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		f.t.Fatalf("prlimit: %v", err)
	}
	lim := unix.Rlimit{Cur: min(cur, old.Max), Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
		f.t.Fatalf("prlimit: %v", err)
	}
}

// streamMsgs is the number of messages in the stream.
func (f *faultEnv) streamMsgs() int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, n := f.stream(ctx)
	return n
}

// The state directory fills up (or turns read-only) while orders change:
// the watcher turns not ready, stops sweeping (no calls to the service),
// publishes nothing it had not committed, survives a kill -9 and a restart
// on the still-full disk, and recovers once there is room, with nothing
// lost or doubled.
func TestFaultStateNotWritable(t *testing.T) {
	cycles, outage := 1, 6*time.Second
	if *faultLong {
		cycles, outage = 5, 30*time.Second
	}
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	f.mutate(20)
	base := "http://" + f.addr
	notWritable := func() bool {
		code, body := get(base + "/readyz")
		return code == 503 && strings.Contains(body, "not writable")
	}
	for c := range cycles {
		time.Sleep(2 * time.Second)
		f.fillDisk()
		waitFor(t, "readiness to fail on the full disk", 15*time.Second, notWritable)
		if code, _ := get(base + "/healthz"); code != 200 {
			t.Errorf("healthz %d on a full disk; the process should stay alive", code)
		}
		// The outbox cannot grow now: what reaches the stream from here on
		// was committed before, at most the outbox depth of this moment.
		_, m := get(base + "/metrics")
		depth, before := int(metricValue(m, "orderwatch_outbox_depth")), f.streamMsgs()
		if metricValue(m, "orderwatch_state_writable") != 0 {
			t.Error("orderwatch_state_writable is not 0 on a full disk")
		}
		time.Sleep(2 * time.Second) // a sweep in flight ends
		calls := f.sim.Stats().SearchCalls
		time.Sleep(outage / 2)
		if got := f.sim.Stats().SearchCalls - calls; got != 0 {
			t.Errorf("cycle %d: %d search calls while the state file was not writable; want 0", c, got)
		}
		if c == 0 {
			// kill -9 on the full disk; the new process opens the file
			// without writing and finds the disk full by itself.
			f.kill()
			f.start()
			f.fillDisk()
			waitFor(t, "readiness to fail after a restart on the full disk", 15*time.Second, notWritable)
		} else {
			time.Sleep(outage / 2)
		}
		if after := f.streamMsgs(); after-before > depth {
			t.Errorf("cycle %d: %d messages reached the stream on a full disk, the outbox held %d", c, after-before, depth)
		}
		f.clearDisk()
		waitReady(t, f.addr)
	}
	f.quiesce()
	n := f.check()
	f.mu.Lock()
	logs := f.logs.String()
	f.mu.Unlock()
	if !strings.Contains(logs, "state file not writable") || !strings.Contains(logs, "state file writable again") {
		t.Errorf("the log does not tell the start and the end of the outage:\n%s", grepLines(logs, "writ"))
	}
	t.Logf("state file not writable %d times for %v (one kill -9 and restart on the full disk): %d events checked", cycles, outage, n)
}

func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
