package events

import (
	"fmt"
	"mime"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ContentType is the Content-Type header of every message: CloudEvents
// structured mode in JSON.
const ContentType = "application/cloudevents+json"

// Decode decodes the event of a NATS message from its header and data, as
// a CloudEvents SDK reads structured mode: a Content-Type header, when
// present, must be application/cloudevents+json (parameters such as
// charset are allowed); the data is the whole event (Unmarshal). A message
// without the header is read as structured too (orderwatch always sets it;
// a tool that copies messages may drop it). A Nats-Msg-Id header must equal
// the event id.
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
	if id := h.Get(nats.MsgIdHdr); id != "" && id != e.ID {
		return e, fmt.Errorf("%w: header %s %q differs from the event id %q", ErrNotEvent, nats.MsgIdHdr, id, e.ID)
	}
	return e, nil
}

// FromMsg decodes the event of a JetStream message (a consumer's Fetch,
// Consume or Messages).
func FromMsg(m jetstream.Msg) (Event, error) { return Decode(m.Headers(), m.Data()) }

// FromNATS decodes the event of a core NATS message (a plain subscription,
// or WATCHER_STREAM="").
func FromNATS(m *nats.Msg) (Event, error) { return Decode(m.Header, m.Data) }
