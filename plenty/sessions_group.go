package plenty

import (
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"
	"sync"
	"time"
)

// The sessions of the hot-standby group (package replica): every replica's
// client may open sessions on the shop (the active; one past its lease's
// deadline whose login went out late), and all count against the shop's
// one limit. Each client names itself in its record (Owner, a random id
// per client); the record's UnsureEnds are its own (it alone removes one,
// when the outcome of its login is known) and Others the other clients'
// as last known, each with when its owner saved them. A merge keeps each
// client's latest list, so a session another replica may have open is
// counted by the active (AdoptSessions) and never resurrected once its
// owner knows it closed.

// sessionsOf is what one other client of the group may have open.
type sessionsOf struct {
	Ends    []time.Time `json:"ends,omitempty"`
	SavedAt time.Time   `json:"saved_at"`
}

// othersHorizon: a client whose record was saved this long ago has no
// session left (the longest lifetime is a day).
const othersHorizon = 48 * time.Hour

// groupInbox is the group's record for a running client to adopt (set by
// any goroutine, taken under sessMu).
type groupInbox struct {
	mu  sync.Mutex
	rec *guardRecord
}

func (g *loginGuard) ownerID() string {
	if g.owner == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		g.owner = hex.EncodeToString(b[:])
	}
	return g.owner
}

// clients is every client's sessions a record names: its writer's own and
// the others'.
func (r guardRecord) clients() map[string]sessionsOf {
	out := maps.Clone(r.Others)
	if out == nil {
		out = map[string]sessionsOf{}
	}
	if r.Owner != "" {
		out[r.Owner] = sessionsOf{Ends: r.UnsureEnds, SavedAt: r.SavedAt}
	}
	return out
}

// note keeps s as owner's sessions in others when it is later than the
// list known (ends past at dropped).
func noteOthers(others map[string]sessionsOf, owner string, s sessionsOf, at time.Time) {
	if cur, ok := others[owner]; ok && !s.SavedAt.After(cur.SavedAt) {
		return
	}
	if s.SavedAt.Before(at.Add(-othersHorizon)) {
		return
	}
	s.Ends = slices.DeleteFunc(slices.Clone(s.Ends), func(end time.Time) bool { return !end.After(at) })
	others[owner] = s
}

// open is how many sessions the client may have open without a token for
// them: its own unsure ones and the group's other clients' (sessMu held).
func (g *loginGuard) open(now time.Time) int {
	g.prune(now)
	n := len(g.unsure)
	for k, o := range g.others {
		o.Ends = slices.DeleteFunc(o.Ends, func(end time.Time) bool { return !end.After(now) })
		if o.SavedAt.Before(now.Add(-othersHorizon)) {
			delete(g.others, k)
			continue
		}
		g.others[k] = o
		n += len(o.Ends)
	}
	return n
}

// firstEnd is the earliest end of the sessions open counts (zero: none).
func (g *loginGuard) firstEnd() time.Time {
	ends := slices.Clone(g.unsure)
	for _, o := range g.others {
		ends = append(ends, o.Ends...)
	}
	if len(ends) == 0 {
		return time.Time{}
	}
	return slices.MinFunc(ends, time.Time.Compare)
}

// trim keeps at most keep of the sessions open counts, the latest ending
// (the service said how many are open: sessMu held).
func (g *loginGuard) trim(keep int) {
	type end struct {
		owner string // "": own
		at    time.Time
	}
	var all []end
	for _, at := range g.unsure {
		all = append(all, end{"", at})
	}
	for k, o := range g.others {
		for _, at := range o.Ends {
			all = append(all, end{k, at})
		}
	}
	if len(all) <= keep {
		return
	}
	slices.SortFunc(all, func(a, b end) int { return a.at.Compare(b.at) })
	g.unsure = nil
	for k, o := range g.others {
		o.Ends = nil
		g.others[k] = o
	}
	for _, e := range all[len(all)-max(keep, 0):] {
		if e.owner == "" {
			g.unsure = append(g.unsure, e.at)
			continue
		}
		o := g.others[e.owner]
		o.Ends = append(o.Ends, e.at)
		g.others[e.owner] = o
	}
}

// AdoptSessions makes the running client count the sessions other
// replicas of the group may have open, and honour a login wait one of
// them was told, as its record of them says (the "sessions" record the
// replica merged into Config.Sessions: replica.LimitsApplier); they bind
// from its next login or renewal on. Safe for concurrent use.
func (c *Client) AdoptSessions() {
	if c.cfg.Sessions == nil {
		return
	}
	var r guardRecord
	if found, err := c.cfg.Sessions.LoadRecord(SessionsRecord, &r); err != nil || !found {
		return
	}
	c.logins.in.mu.Lock()
	c.logins.in.rec = &r
	c.logins.in.mu.Unlock()
}

// adoptGroup takes what AdoptSessions left (sessMu held, the guard loaded).
func (c *Client) adoptGroup(now time.Time) {
	g := &c.logins
	g.in.mu.Lock()
	r := g.in.rec
	g.in.rec = nil
	g.in.mu.Unlock()
	if r == nil {
		return
	}
	if g.others == nil {
		g.others = map[string]sessionsOf{}
	}
	before := g.open(now)
	for k, s := range r.clients() {
		if k != g.ownerID() {
			noteOthers(g.others, k, s, now)
		}
	}
	held := false
	if r.NotBefore.After(now) && r.NotBefore.After(g.notBefore) {
		wait := max(c.cfg.LoginBackoff, c.cfg.LoginSpacing)
		g.notBefore, g.wait, g.reason = minTime(r.NotBefore, now.Add(wait)), wait, restoredKind(r.Reason, r.Kind)
		held = true
	}
	if n := g.open(now); n != before || held {
		c.log.Info("the group's sessions adopted: sessions another replica may have open count against the shop's limit",
			"open_without_token", n, "session_limit", g.limit, "no_login_before", g.notBefore.Format(time.RFC3339))
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// restoredKind is a restored reason of a login wait.
func restoredKind(text, kind string) error {
	reason := &restoredReason{text: text}
	for _, k := range reasonKinds {
		if k.kind == kind {
			reason.kind = k.err
		}
	}
	return reason
}
