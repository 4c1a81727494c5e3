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
		out.UnsureEnds = liveEnds(append(slices.Clone(o.UnsureEnds), g.UnsureEnds...), now)
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
	var unnamed sessionsOf
	join := func(s sessionsOf) {
		unnamed.Ends = append(unnamed.Ends, s.Ends...)
		if s.SavedAt.After(unnamed.SavedAt) {
			unnamed.SavedAt = s.SavedAt
		}
	}
	for _, r := range []guardRecord{o, g} {
		for k, s := range r.clients() {
			switch {
			case k == unnamedClient:
				join(s)
			case k != o.Owner || o.Owner == "":
				noteOthers(out, k, s, now)
			}
		}
	}
	if o.Owner != "" && g.Owner == "" {
		join(sessionsOf{Ends: g.UnsureEnds, SavedAt: g.SavedAt})
	}
	if ends := liveEnds(unnamed.Ends, now); len(ends) > 0 {
		out[unnamedClient] = sessionsOf{Ends: ends, SavedAt: unnamed.SavedAt}
	}
	if len(out) == 0 {
		return nil
	}
	return out
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
