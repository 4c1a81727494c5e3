package fleet

import (
	"fmt"
	"time"

	"github.com/orderwatch/orderwatch/pipeline"
)

// clash is another process announcing under this member's key: two pods
// with one WATCHER_INSTANCE_ID, processes on one host all named after it,
// or two names that are one key (memberKey: "m.1" and "m_1"). Their
// announcements overwrite each other, so every member counts one member
// where there are two. The process that first announced later (the
// members bucket's revisions: the server's order, not the clocks')
// refuses to go on (Run returns a configuration error naming both); the
// earlier one logs it and goes on.
type clash struct {
	text  string
	later bool      // this process is the later one
	at    time.Time // the other's last announcement seen
}

// noteClashLocked looks at an announcement under this member's key: one
// by another process written after this member first announced (so not
// the last one of a process before it on this name) is a clash.
func (f *Fleet) noteClashLocked(m Member) {
	if m.Nonce == f.nonce || f.firstRev == 0 || m.rev <= f.firstRev {
		return
	}
	// The later is the one whose first announcement the server stored
	// later (a revision), not the one whose clock says so: a process whose
	// clock lags would otherwise pass for the earlier one.
	other := m.First
	if other == 0 {
		other = m.rev // its first announcement
	}
	later := f.firstRev > other || (f.firstRev == other && f.nonce > m.Nonce)
	text := fmt.Sprintf("two members announce under one name %q: this process (instance %q on host %s, since %s) and instance %q on host %s (since %s): give each member a %s_INSTANCE_ID of its own",
		memberKey(f.cfg.Instance), f.cfg.Instance, f.cfg.Host, f.since.UTC().Format(time.RFC3339), m.Instance, m.Host, m.Since.UTC().Format(time.RFC3339), pipeline.EnvPrefix)
	if f.clash == nil {
		if later {
			f.log.Error("fleet: "+text+"; this process, the later one, stops", "member", f.cfg.Instance)
		} else {
			f.log.Error("fleet: "+text+"; the later one stops", "member", f.cfg.Instance)
		}
		f.m.clashes.Inc()
	}
	f.clash = &clash{text: text, later: later, at: time.Now()}
	f.poke()
}

// refused is the clash that makes this process stop, as a configuration
// error; nil when there is none.
func (f *Fleet) refused() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clash == nil || !f.clash.later {
		return nil
	}
	return pipeline.ConfigErrorf("%s", f.clash.text)
}

// clashLocked is the clash in force: for the earlier process, one whose
// other process has not announced for three TTLs (it stopped) is over.
func (f *Fleet) clashLocked(now time.Time) *clash {
	if c := f.clash; c != nil && !c.later && now.Sub(c.at) > 3*f.cfg.MemberTTL {
		f.clash = nil
	}
	return f.clash
}
