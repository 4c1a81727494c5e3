package replica

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/lease"
)

// TestForeignCheckpointNamesTheWriter: a checkpoint (or takeover) refused
// because another replica writes the group's checkpoint is logged plainly,
// naming that replica, its process and its tenure; other failures with
// their error.
func TestForeignCheckpointNamesTheWriter(t *testing.T) {
	var buf bytes.Buffer
	r := &Replica{log: slog.New(slog.NewTextHandler(&buf, nil))}
	foreign := fmt.Errorf("write checkpoint k: %w", &lease.ForeignError{Writer: lease.Writer{Instance: "pod-1", Nonce: "n1", Epoch: 7}})
	r.checkpointFailed("writing the checkpoint failed", foreign)
	r.checkpointFailed("writing the checkpoint failed", errors.New("disk error"))
	got := buf.String()
	for _, want := range []string{
		`msg="writing the checkpoint failed: another replica writes the group's checkpoint, so this one is not the active one and stops" writer=pod-1 writer_nonce=n1 writer_tenure=7`,
		`msg="writing the checkpoint failed" err="disk error"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
}
