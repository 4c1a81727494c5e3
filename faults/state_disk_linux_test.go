//go:build linux

package faults

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orderwatch/orderwatch/plentysim"
)

var faultTmpfs = flag.Bool("fault-tmpfs", false, "TestFaultStateNotWritable: fill a real 4 MiB tmpfs (needs root) instead of lowering the watcher's file size limit")

// diskFault makes the state directory full and gives it room again. By
// default the watcher's file size limit drops to 8 KiB, where bbolt's two
// meta pages end, so every transaction fails writing its first page with
// EFBIG; that needs no root and no mount, and the watcher takes the same
// path as for ENOSPC (full) or EROFS (read-only). With -fault-tmpfs the
// state file lives on a real tmpfs of 4 MiB that a filler file fills up.
type diskFault struct {
	f   *faultEnv
	dir string // the tmpfs, or ""
}

// mountTmpfs mounts a small tmpfs for the state file (root only).
func mountTmpfs(t *testing.T) (string, error) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=4m"); err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir, nil
}

// fill fills the disk (or limits the running watcher's file size).
func (d *diskFault) fill() {
	d.f.t.Helper()
	if d.dir == "" {
		d.f.setFileLimit(8192)
		return
	}
	fl, err := os.OpenFile(filepath.Join(d.dir, "filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.f.t.Fatal(err)
	}
	defer fl.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := fl.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				d.f.t.Fatalf("filling the tmpfs: %v", err)
			}
			return
		}
	}
}

// clear gives the disk room again.
func (d *diskFault) clear() {
	d.f.t.Helper()
	if d.dir == "" {
		d.f.setFileLimit(unix.RLIM_INFINITY)
		return
	}
	if err := os.Remove(filepath.Join(d.dir, "filler")); err != nil {
		d.f.t.Fatal(err)
	}
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

// platformFaults are the soak's faults that need Linux: the state file's
// disk full for 20 s.
func platformFaults(f *faultEnv) []func() {
	return []func(){func() {
		disk := &diskFault{f: f}
		disk.fill()
		time.Sleep(20 * time.Second)
		disk.clear()
	}}
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
	var env []string
	var tmpfs string
	if *faultTmpfs {
		// One cycle only: once bbolt has written pages it reuses them in
		// place, so a later full tmpfs fails its writes only when it needs
		// new blocks (a full disk is no failure while the file has room).
		cycles = 1
		var err error
		if tmpfs, err = mountTmpfs(t); err != nil {
			t.Fatalf("mounting a tmpfs (-fault-tmpfs needs root): %v", err)
		}
		env = append(env, "WATCHER_STATE_PATH="+filepath.Join(tmpfs, "state.db"))
	}
	f := newFaultEnv(t, plentysim.Config{}, env...)
	disk := &diskFault{f: f, dir: tmpfs}
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
		disk.fill()
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
			disk.fill()
			waitFor(t, "readiness to fail after a restart on the full disk", 15*time.Second, notWritable)
		} else {
			time.Sleep(outage / 2)
		}
		if after := f.streamMsgs(); after-before > depth {
			t.Errorf("cycle %d: %d messages reached the stream on a full disk, the outbox held %d", c, after-before, depth)
		}
		disk.clear()
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
	how := "file size limit (EFBIG)"
	if tmpfs != "" {
		how = "a full tmpfs (ENOSPC)"
	}
	t.Logf("state file not writable (%s) %d times for %v, one kill -9 and restart on the full disk: %d events checked", how, cycles, outage, n)
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

// The state directory is read-only when the watcher starts (a volume
// mounted read-only, a filesystem the kernel remounted read-only after
// errors): the watcher exits 1 with one line naming the file and the
// cause, and writes nothing; started again once the directory is
// writable, it resumes from its watermark with nothing lost or doubled.
// A read-only filesystem while it runs fails writes like a full disk
// (TestFaultStateNotWritable). Needs a tmpfs it can remount (root).
func TestFaultStateReadOnly(t *testing.T) {
	dir, err := mountTmpfs(t)
	if err != nil {
		t.Skipf("needs root to mount a tmpfs it can remount read-only: %v", err)
	}
	remount := func(flags uintptr) {
		t.Helper()
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|flags, "size=4m"); err != nil {
			t.Fatalf("remounting the tmpfs: %v", err)
		}
	}
	f := newFaultEnv(t, plentysim.Config{}, "WATCHER_STATE_PATH="+filepath.Join(dir, "state.db"))
	f.start()
	waitReady(t, f.addr)
	f.mutate(20)
	time.Sleep(3 * time.Second)
	f.kill()
	remount(unix.MS_RDONLY)
	calls := f.sim.Stats().SearchCalls
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, watcherBin(t), "run")
	cmd.Env = f.env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 ||
		!strings.Contains(string(out), "cannot be opened for writing") || !strings.Contains(string(out), "read-only file system") {
		t.Errorf("start on a read-only state directory: %v, want exit status 1 and a line naming the cause:\n%s", err, out)
	}
	if n := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; n != 1 {
		t.Errorf("start on a read-only state directory logged %d lines, want 1:\n%s", n, out)
	}
	if got := f.sim.Stats().SearchCalls - calls; got != 0 {
		t.Errorf("%d search calls from a watcher that could not open its state file", got)
	}
	time.Sleep(3 * time.Second) // orders go on changing while it is down
	remount(0)
	f.start()
	waitReady(t, f.addr)
	f.quiesce()
	t.Logf("start on a read-only state directory: exit 1 with %q; %d events checked after the restart", strings.TrimSpace(string(out)), f.check())
}
