package plenty

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// ShiftSessions moves the local-clock times of a "sessions" record by d:
// the login wait and the ends of the sessions that may be open (the
// fresh token's expiry names the token record's and stays).
func ShiftSessions(raw json.RawMessage, d time.Duration) (json.RawMessage, error) {
	var r guardRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("record %s: %w", SessionsRecord, err)
	}
	r.NotBefore, r.SavedAt = shiftTime(r.NotBefore, d), shiftTime(r.SavedAt, d)
	for i := range r.UnsureEnds {
		r.UnsureEnds[i] = shiftTime(r.UnsureEnds[i], d)
	}
	for k, o := range r.Others {
		for i := range o.Ends {
			o.Ends[i] = shiftTime(o.Ends[i], d)
		}
		o.SavedAt = shiftTime(o.SavedAt, d)
		r.Others[k] = o
	}
	return json.Marshal(r)
}

// MergeSessions combines this replica's "sessions" record with the
// group's (on this replica's clock): the later login wait with its
// reason, every session that may still be open at now, the session limit
// and lifetime known (this replica's first). The sessions are each
// client's (sessions_group.go): this replica's own as it saved them (a
// session it knows closed is not brought back by an older copy of its
// record), every other client's as its latest record says. The sessions
// of records that name no client (an earlier version's, or one merged
// into none) are nobody's to close: joined, the own's when neither names
// one, else kept as unnamedClient's; the others such records hold are
// merged as any. A group's record that does not decode is an error (the
// caller keeps its own).
func MergeSessions(own, group json.RawMessage, now time.Time) (json.RawMessage, error) {
	var g, o guardRecord
	if err := json.Unmarshal(group, &g); err != nil {
		return nil, fmt.Errorf("record %s: %w", SessionsRecord, err)
	}
	if len(own) == 0 || json.Unmarshal(own, &o) != nil {
		o = guardRecord{}
	}
	out := o
	if g.NotBefore.After(o.NotBefore) {
		out.NotBefore, out.Wait, out.Reason, out.Kind = g.NotBefore, g.Wait, g.Reason, g.Kind
	}
	out.UnsureEnds = liveEnds(o.UnsureEnds, now)
	if o.Owner == "" && g.Owner == "" {
		out.UnsureEnds = joinEnds(out.UnsureEnds, liveEnds(g.UnsureEnds, now))
	}
	out.Others = mergeOthers(o, g, now)
	if out.Limit <= 0 {
		out.Limit = g.Limit
	}
	if out.Lifetime <= 0 {
		out.Lifetime = g.Lifetime
	}
	out.Spacing = max(out.Spacing, g.Spacing)
	if g.SavedAt.After(out.SavedAt) {
		out.SavedAt = g.SavedAt
	}
	return json.Marshal(out)
}

// unnamedClient keeps, in a record that names its client, the sessions of
// a record that named none (an earlier version's writer's): no client
// closes them, every merge joins them. (A client's own name is hex.)
const unnamedClient = "unnamed"

// mergeOthers is the other clients' sessions of the records o (own) and
// g merged at now: each client's latest list, but o's writer's (its own),
// and the sessions of no named client joined (unnamedClient).
func mergeOthers(o, g guardRecord, now time.Time) map[string]sessionsOf {
	out := map[string]sessionsOf{}
	for _, r := range []guardRecord{o, g} {
		for k, s := range r.clients() {
			if k != unnamedClient && (k != o.Owner || o.Owner == "") {
				noteOthers(out, k, s, now)
			}
		}
	}
	mine, theirs := o.Others[unnamedClient], g.Others[unnamedClient]
	if o.Owner != "" && g.Owner == "" {
		theirs.Ends = append(slices.Clone(theirs.Ends), g.UnsureEnds...)
		theirs.SavedAt = later(theirs.SavedAt, g.SavedAt)
	}
	// A session a named client lists (its writer's own record of an
	// earlier version, restored by this version's client as its own) is
	// that client's: counted once.
	var named []time.Time
	if o.Owner != "" {
		named = append(named, o.UnsureEnds...)
	}
	for _, s := range out {
		named = append(named, s.Ends...)
	}
	ends := joinEnds(liveEnds(mine.Ends, now), liveEnds(theirs.Ends, now))
	ends = slices.DeleteFunc(ends, func(end time.Time) bool {
		return slices.ContainsFunc(named, func(n time.Time) bool { return n.Sub(end).Abs() <= copySlack })
	})
	if len(ends) > 0 {
		out[unnamedClient] = sessionsOf{Ends: ends, SavedAt: later(mine.SavedAt, theirs.SavedAt)}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// copySlack is how far apart the ends of one session may be in two copies
// of a record that names no client for it (unnamedClient's): each read of
// the group's record moves it onto the reader's clock by a bound of the
// clocks' difference, a few milliseconds off each time, and a copy that
// came back through another replica differs from the one it left by the
// sum. Seconds above that, and below the login spacing (5 s by default)
// that parts two logins of one client.
const copySlack = 2 * time.Second

// joinEnds is the sessions of two copies of a list that names no client
// (mine and theirs, each with its ends once): each end of theirs within
// copySlack of one of mine not yet matched is that session (the later
// end kept: never shorter), the others are added. Ends of one list are
// never taken for one session (sessions of different clients may end
// within copySlack of each other).
func joinEnds(mine, theirs []time.Time) []time.Time {
	out := slices.SortedFunc(slices.Values(mine), time.Time.Compare)
	n := len(out)
	matched := make([]bool, n)
	for _, end := range slices.SortedFunc(slices.Values(theirs), time.Time.Compare) {
		i := slices.IndexFunc(out[:n], func(e time.Time) bool { return e.Sub(end).Abs() <= copySlack })
		for i >= 0 && i < n && matched[i] {
			i++ // sorted: the next of mine may still be within copySlack
		}
		if i < 0 || i >= n || out[i].Sub(end).Abs() > copySlack {
			out = append(out, end)
			continue
		}
		matched[i] = true
		out[i] = later(out[i], end)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// liveEnds is the ends after now, each once.
func liveEnds(ends []time.Time, now time.Time) (out []time.Time) {
	for _, end := range ends {
		if end.After(now) && !slices.ContainsFunc(out, end.Equal) {
			out = append(out, end)
		}
	}
	return out
}
