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
// record), every other client's as its latest record says. Records that
// name no client (an earlier version's) are joined. A group's record
// that does not decode is an error (the caller keeps its own).
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
	live := func(ends []time.Time) (out []time.Time) {
		for _, end := range ends {
			if end.After(now) && !slices.ContainsFunc(out, end.Equal) {
				out = append(out, end)
			}
		}
		return out
	}
	if o.Owner == "" && g.Owner == "" {
		out.UnsureEnds = live(append(o.UnsureEnds, g.UnsureEnds...))
	} else {
		out.UnsureEnds = live(o.UnsureEnds)
		out.Others = map[string]sessionsOf{}
		for _, r := range []guardRecord{o, g} {
			for k, s := range r.clients() {
				if k != o.Owner || o.Owner == "" {
					noteOthers(out.Others, k, s, now)
				}
			}
		}
		if len(out.Others) == 0 {
			out.Others = nil
		}
	}
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
