package lease

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ServerFeatures is what the connected NATS server offers the watcher's
// buckets (for `watcher check`).
type ServerFeatures struct {
	Version  string // the server's version, as it announces it
	APILevel int    // JetStream API level: 0 before 2.11
	// LimitMarkers: per-key TTL markers (API level 1, NATS 2.11): an
	// expired lease leaves a delete marker that wakes the standbys at
	// once. Without them a standby notices at its next attempt (every
	// TTL/3); the fencing is the same (see the package comment).
	LimitMarkers bool
}

// Server asks the connected server for its version and JetStream API level.
func Server(ctx context.Context, js jetstream.JetStream) (ServerFeatures, error) {
	f := ServerFeatures{Version: js.Conn().ConnectedServerVersion()}
	info, err := js.AccountInfo(ctx)
	if err != nil {
		return f, fmt.Errorf("NATS server %s: JetStream: %w", f.Version, err)
	}
	f.APILevel = info.API.Level
	f.LimitMarkers = f.APILevel >= 1
	return f, nil
}

// Lacks names what the server lacks and what that means for the watcher;
// empty when nothing.
func (f ServerFeatures) Lacks() []string {
	var out []string
	if !f.LimitMarkers {
		out = append(out, "per-key TTL markers (NATS 2.11): the lease works without them; a standby notices an expired lease at its next attempt (every third of the TTL) instead of at once")
	}
	return out
}
