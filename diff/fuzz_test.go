package diff

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
)

// FuzzDecide decides an arbitrary entry against an arbitrary previous state
// (itself decoded from an entry): Decide never panics, is deterministic and
// idempotent, never emits an event older than the snapshot, and every event
// encodes to valid JSON under a valid subject.
func FuzzDecide(f *testing.F) {
	entries := fixtureEntries(f)
	for i, e := range entries {
		prev := entries[(i+1)%len(entries)]
		f.Add([]byte(e), []byte(prev), true, int64(1795302000), uint8(i))
		f.Add([]byte(e), []byte(e), true, int64(0), uint8(0xff))
		f.Add([]byte(e), []byte(nil), false, int64(1763000000), uint8(i*3))
	}
	f.Add([]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00Z","statusId":"1e3","lockStatus":"\u0000\"","ownerId":12.50}`),
		[]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00+14:00","statusId":-0}`), true, int64(-62135596800), uint8(5))
	f.Fuzz(func(t *testing.T, raw, prevRaw []byte, hasPrev bool, baselineUnix int64, flags uint8) {
		o, err := plenty.DecodeOrder(raw)
		if err != nil {
			return
		}
		var prev *State
		if hasPrev {
			po, err := plenty.DecodeOrder(prevRaw)
			if err != nil {
				return
			}
			s := StateOf(po)
			prev = &s
		}
		opt := Options{
			InBaseline:   flags&1 != 0,
			EmitBaseline: flags&2 != 0,
			EmitUpdated:  flags&4 != 0,
		}
		if flags&8 == 0 {
			opt.Baseline = time.Unix(baselineUnix, 0)
		}
		next, store, events := Decide(prev, o, opt)
		next2, store2, events2 := Decide(prev, o, opt)
		if store != store2 || !reflect.DeepEqual(next, next2) || !reflect.DeepEqual(events, events2) {
			t.Fatalf("not deterministic")
		}
		stale := prev != nil && o.UpdatedAt.Before(prev.UpdatedAt.Time)
		if stale && (store || len(events) != 0) {
			t.Fatalf("stale entry stored=%v events=%v", store, events)
		}
		if prev == nil && !store {
			t.Fatalf("first sight not stored")
		}
		if len(events) > 0 && !store {
			t.Fatalf("events without a store: %v", events)
		}
		if store {
			if _, again, evs := Decide(&next, o, opt); again || len(evs) != 0 {
				t.Fatalf("not idempotent: store=%v events=%v", again, evs)
			}
		}
		seen := map[string]bool{}
		for _, e := range events {
			if e.Before != nil && e.After.UpdatedAt.Before(e.Before.UpdatedAt.Time) {
				t.Fatalf("%s: stale event: after %v before %v", e.Type, e.After.UpdatedAt, e.Before.UpdatedAt)
			}
			if prev != nil && e.After.UpdatedAt.Before(prev.UpdatedAt.Time) {
				t.Fatalf("%s: event older than the snapshot", e.Type)
			}
			if len(e.ID) != 32 || strings.Trim(e.ID, "0123456789abcdef") != "" || seen[e.ID] {
				t.Fatalf("%s: bad or repeated id %q", e.Type, e.ID)
			}
			seen[e.ID] = true
			if err := ValidPrefix(e.Subject("orders")); err != nil {
				t.Fatalf("%s: subject %q: %v", e.Type, e.Subject("orders"), err)
			}
			b := Encode(nil, e, "https://shop.example/\x00\"")
			checkEncoded(t, e, b)
			var back struct {
				Data struct {
					Order json.RawMessage `json:"order"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: %v", e.Type, err)
			}
		}
		// State.MarshalJSON is valid JSON for any state.
		if b, err := json.Marshal(next); err != nil || !json.Valid(b) {
			t.Fatalf("state JSON %s: %v", b, err)
		}
	})
}
