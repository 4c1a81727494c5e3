package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/schemas"
)

// TestSchemaExamplesDecode: every example in the JSON Schemas decodes into
// the types, re-encodes to the same JSON value and passes its schema.
func TestSchemaExamplesDecode(t *testing.T) {
	ex, err := schemas.Examples()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, typ := range schemas.Types {
		for _, b := range ex[typ] {
			ev, err := events.Unmarshal(b)
			if err != nil {
				t.Fatalf("%s example: %v", typ, err)
			}
			if string(ev.Type) != typ {
				t.Errorf("%s example decoded as %s", typ, ev.Type)
			}
			sameJSON(t, b, ev)
			n++
		}
	}
	if n < len(schemas.Types) {
		t.Fatalf("%d examples for %d types", n, len(schemas.Types))
	}
}

// example returns the first schema example of typ as a JSON object.
func example(t *testing.T, typ events.Type) map[string]any {
	t.Helper()
	ex, err := schemas.Examples()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(ex[string(typ)][0], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeRefuses(t *testing.T) {
	data := func(m map[string]any) map[string]any { return m["data"].(map[string]any) }
	for _, tc := range []struct {
		name    string
		typ     events.Type
		header  nats.Header
		change  func(m map[string]any)
		want    error
		mention string
	}{
		{"binary mode content type", events.StatusChanged, nats.Header{"Content-Type": {"application/json"}}, nil, events.ErrNotEvent, "Content-Type"},
		{"batch content type", events.StatusChanged, nats.Header{"Content-Type": {"application/cloudevents-batch+json"}}, nil, events.ErrNotEvent, "Content-Type"},
		{"msg id of another event", events.StatusChanged, nats.Header{"Nats-Msg-Id": {strings.Repeat("0", 32)}}, nil, events.ErrNotEvent, "Nats-Msg-Id"},
		{"specversion 0.3", events.StatusChanged, nil, func(m map[string]any) { m["specversion"] = "0.3" }, events.ErrNotEvent, "specversion"},
		{"id not an event id", events.StatusChanged, nil, func(m map[string]any) { m["id"] = "42" }, events.ErrNotEvent, "id"},
		{"no source", events.StatusChanged, nil, func(m map[string]any) { delete(m, "source") }, events.ErrNotEvent, "source"},
		{"datacontenttype", events.StatusChanged, nil, func(m map[string]any) { m["datacontenttype"] = "text/plain" }, events.ErrNotEvent, "datacontenttype"},
		{"subject of another order", events.LockChanged, nil, func(m map[string]any) { m["subject"] = "9" }, events.ErrNotEvent, "subject"},
		{"before set on created", events.Created, nil, func(m map[string]any) { data(m)["before"] = data(m)["after"] }, events.ErrNotEvent, "before"},
		{"before null on status_changed", events.StatusChanged, nil, func(m map[string]any) { data(m)["before"] = nil }, events.ErrNotEvent, "before"},
		{"status as a string", events.StatusChanged, nil, func(m map[string]any) { data(m)["after"].(map[string]any)["statusId"] = "5.1" }, events.ErrNotEvent, `decimal: "5.1"`},
		{"unknown type", events.Updated, nil, func(m map[string]any) { m["type"] = "order.deleted" }, events.ErrUnknownType, "order.deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := example(t, tc.typ)
			if tc.change != nil {
				tc.change(m)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			h := nats.Header{"Content-Type": {events.ContentType}}
			for k, v := range tc.header {
				h[k] = v
			}
			_, err = events.Decode(h, b)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("Decode = %v, want %v mentioning %q", err, tc.want, tc.mention)
			}
		})
	}
	// The same example, untouched, is accepted with and without headers.
	b, _ := json.Marshal(example(t, events.StatusChanged))
	ev, err := events.Decode(nats.Header{"Content-Type": {events.ContentType + "; charset=utf-8"}}, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.Decode(nats.Header{"Nats-Msg-Id": {ev.ID}}, b); err != nil {
		t.Errorf("without Content-Type: %v", err)
	}
	// The Nats-Msg-Id of a shop's event names the shop (events.MsgID); the
	// shop must be the message's own.
	shopHdr := nats.Header{"Nats-Msg-Id": {events.MsgID("berlin", ev.ID)}, "Orderwatch-Shop": {"berlin"}}
	if _, err := events.Decode(shopHdr, b); err != nil {
		t.Errorf("with the shop's Nats-Msg-Id: %v", err)
	}
	shopHdr.Set("Orderwatch-Shop", "paris")
	if _, err := events.Decode(shopHdr, b); !errors.Is(err, events.ErrNotEvent) {
		t.Errorf("with another shop's Nats-Msg-Id: %v, want ErrNotEvent", err)
	}
	if got := events.EventIDOfMsgID(events.MsgID("berlin", ev.ID)); got != ev.ID {
		t.Errorf("EventIDOfMsgID = %q, want %q", got, ev.ID)
	}
	for _, junk := range []string{``, `[]`, `{"specversion":"1.0"`, `{} {}`} {
		if _, err := events.Unmarshal([]byte(junk)); !errors.Is(err, events.ErrNotEvent) {
			t.Errorf("Unmarshal(%q) = %v", junk, err)
		}
	}
}

func TestEnteredAndLeft(t *testing.T) {
	ev := func(typ events.Type, before, after events.Decimal) events.Event {
		e := events.Event{Type: typ, Data: events.Data{After: events.State{StatusID: after}}}
		if before != "none" {
			e.Data.Before = &events.State{StatusID: before}
		}
		return e
	}
	for _, tc := range []struct {
		e             events.Event
		s             events.Decimal
		entered, left bool
	}{
		{ev(events.StatusChanged, "5", "6"), "6", true, false},
		{ev(events.StatusChanged, "5", "6"), "5", false, true},
		{ev(events.StatusChanged, "5.10", "6"), "5.1", false, true},
		{ev(events.StatusChanged, "5", "6"), "7", false, false},
		{ev(events.LockChanged, "5", "6"), "6", false, false}, // the status change of the same sweep counts
		{ev(events.Updated, "5", "6"), "6", false, false},
		{ev(events.Created, "none", "6"), "6", true, false},
		{ev(events.Discovered, "none", "6.0"), "6", true, false},
		{ev(events.Discovered, "none", "6"), "5", false, false},
	} {
		if got := tc.e.Entered(tc.s); got != tc.entered {
			t.Errorf("%s %v: Entered(%s) = %v", tc.e.Type, tc.e.Data, tc.s, got)
		}
		if got := tc.e.Left(tc.s); got != tc.left {
			t.Errorf("%s %v: Left(%s) = %v", tc.e.Type, tc.e.Data, tc.s, got)
		}
	}
}
