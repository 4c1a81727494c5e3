package publisher_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// outboxOnly hides every method of the state file but the three of
// publisher.Outbox, as an outbox that keeps no send marks does.
type outboxOnly struct{ st *state.Store }

func (o outboxOnly) Outbox(after uint64, max int) ([]state.OutboxEntry, error) {
	return o.st.Outbox(after, max)
}
func (o outboxOnly) DeleteOutbox(seqs ...uint64) error { return o.st.DeleteOutbox(seqs...) }
func (o outboxOnly) OutboxDepth() int                  { return o.st.OutboxDepth() }

// The send mark that spares a restart its look-ups is a declared, optional
// capability: New finds it on the state file, and says so, in a warning
// and in KeepsSendMarks, when an outbox lacks it (never a silent switch-off).
func TestSendMarksAreCheckedAtConstruction(t *testing.T) {
	srv := runServer(t, nil)
	nc := connect(t, srv.url())
	st := openStore(t, false)
	for _, tt := range []struct {
		name   string
		outbox publisher.Outbox
		stream string
		keeps  bool
		warns  bool
	}{
		{"state file", st, stream, true, false},
		{"outbox without marks", outboxOnly{st}, stream, false, true},
		{"outbox without marks, core NATS", outboxOnly{st}, "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			p, err := publisher.New(nc, tt.outbox, publisher.Config{Stream: tt.stream, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if got := p.KeepsSendMarks(); got != tt.keeps {
				t.Errorf("KeepsSendMarks = %v, want %v", got, tt.keeps)
			}
			if got := strings.Contains(logs.String(), "keeps no send marks"); got != tt.warns {
				t.Errorf("warned = %v, want %v; log:\n%s", got, tt.warns, logs.String())
			}
		})
	}
}
