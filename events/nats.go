package events

import (
	"fmt"
	"mime"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/shopid"
)

// ContentType is the Content-Type header of every message: CloudEvents
// structured mode in JSON.
const ContentType = "application/cloudevents+json"

// Decode decodes the event of a NATS message from its header and data, as
// a CloudEvents SDK reads structured mode: a Content-Type header, when
// present, must be application/cloudevents+json (parameters such as
// charset are allowed); the data is the whole event (Unmarshal). A message
// without the header is read as structured too (orderwatch always sets it;
// a tool that copies messages may drop it). A Nats-Msg-Id header must name
// the event: its id, or MsgID of the message's shop (the Orderwatch-Shop
// header) and its id.
func Decode(h nats.Header, data []byte) (Event, error) {
	if ct := h.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != ContentType {
			return Event{}, fmt.Errorf("%w: Content-Type %q, want %s (structured mode)", ErrNotEvent, ct, ContentType)
		}
	}
	e, err := Unmarshal(data)
	if err != nil {
		return e, err
	}
	if id := h.Get(nats.MsgIdHdr); id != "" && id != e.ID && id != MsgID(h.Get(shopid.Header), e.ID) {
		return e, fmt.Errorf("%w: header %s %q differs from the event id %q", ErrNotEvent, nats.MsgIdHdr, id, e.ID)
	}
	return e, nil
}

// MsgID is the Nats-Msg-Id of an event of a shop: "<shop>:<event id>"
// (a shop id has no ':'), the event id alone without a shop. The event id
// hashes the order, not the shop: in a stream shared by shops, two shops
// making the same change of the same order id in the same second would
// otherwise share a Nats-Msg-Id and the stream would drop the second as a
// duplicate. Consumers key on the event id (Event.ID), never on this.
func MsgID(shop, id string) string {
	if shop == "" {
		return id
	}
	return shop + ":" + id
}

// Key is what a consumer keys an event on (Once, a Deduper, what it
// stores per event): the event id, preceded by the shop that published it
// (the message's Orderwatch-Shop header) and '.', when the header names
// one. An event id hashes the order id, the change and its times, not the
// shop: a consumer of several shops (fleet mode, shops sharing a stream)
// can receive the same id from two shops (the same order id making the
// same change in the same second), which Key keeps apart. A Key is a key
// of a KV bucket; KV and Memory take it as they take an event id.
func Key(h nats.Header, e Event) string {
	shop := h.Get(shopid.Header)
	if shop == "" || shopid.Valid(shop) != nil {
		return e.ID
	}
	return shop + "." + e.ID
}

// keyPattern matches an event id and a Key.
var keyPattern = regexp.MustCompile(`^(?:[a-z0-9][a-z0-9_-]{0,47}\.)?[0-9a-f]{32}$`)

// EventIDOfMsgID is the event id in a Nats-Msg-Id (MsgID, or an event id
// alone as an earlier version sent it).
func EventIDOfMsgID(msgID string) string {
	if i := strings.LastIndexByte(msgID, ':'); i >= 0 {
		return msgID[i+1:]
	}
	return msgID
}

// FromMsg decodes the event of a JetStream message (a consumer's Fetch,
// Consume or Messages).
func FromMsg(m jetstream.Msg) (Event, error) { return Decode(m.Headers(), m.Data()) }

// FromNATS decodes the event of a core NATS message (a plain subscription,
// or WATCHER_STREAM="").
func FromNATS(m *nats.Msg) (Event, error) { return Decode(m.Header, m.Data) }
