package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// The active replica of a group answers rescan requests (watcher rescan)
// over NATS request/reply: it asks the pipeline to read the period from T
// again against its snapshot (Pipeline.Rescan, applied between two
// sweeps); the sweeps that follow read from there to now in verified
// slices and publish only real differences. Progress:
// orderwatch_watermark_timestamp_seconds climbing back to now,
// orderwatch_rescan_requests_total.

// RescanSubject is the group's request subject (outside the stream's
// subjects).
func RescanSubject(key string) string { return "orderwatch.rescan." + key }

// RescanRequest asks for a rescan from From (To: the end of the period of
// interest; the sweeps read on to now).
type RescanRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to,omitzero"`
}

// RescanReply is the active replica's answer.
type RescanReply struct {
	Instance  string    `json:"instance"`
	Accepted  bool      `json:"accepted"`
	Watermark time.Time `json:"watermark,omitzero"` // before the rewind
	Message   string    `json:"message"`
}

// ErrNoActive: no replica answers rescan requests.
var ErrNoActive = errors.New("no active replica answers (none running, a takeover under way, or WATCHER_LEASE is off)")

// RequestRescan sends req to the active replica of the group key.
func RequestRescan(ctx context.Context, nc *nats.Conn, key string, req RescanRequest) (RescanReply, error) {
	b, _ := json.Marshal(req)
	msg, err := nc.RequestWithContext(ctx, RescanSubject(key), b)
	if errors.Is(err, nats.ErrNoResponders) {
		return RescanReply{}, ErrNoActive
	}
	if err != nil {
		return RescanReply{}, err
	}
	var rep RescanReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return RescanReply{}, fmt.Errorf("bad answer: %w", err)
	}
	return rep, nil
}

// serveRescan answers the group's rescan requests while this replica is
// active; stop unsubscribes.
func (r *Replica) serveRescan(p Pipeline) (stop func()) {
	sub, err := r.cfg.NC.Subscribe(RescanSubject(r.Key()), func(msg *nats.Msg) {
		rep := r.rescan(p, msg.Data)
		b, _ := json.Marshal(rep)
		_ = msg.Respond(b)
	})
	if err != nil {
		r.log.Warn("rescan requests cannot be served", "err", err)
		return func() {}
	}
	return func() { _ = sub.Unsubscribe() }
}

// rescan decides about one request.
func (r *Replica) rescan(p Pipeline, data []byte) RescanReply {
	rep := RescanReply{Instance: r.cfg.Instance}
	var req RescanRequest
	m, merr := r.cfg.Store.Meta()
	switch {
	case json.Unmarshal(data, &req) != nil || req.From.IsZero():
		rep.Message = "want {\"from\": RFC 3339 time}"
	case r.Gate() != nil:
		rep.Message = "not the active replica"
	case merr != nil:
		rep.Message = merr.Error()
	case !req.From.Before(m.Watermark):
		rep.Accepted, rep.Watermark = true, m.Watermark
		rep.Message = "nothing to do: the watermark is at or before that time; the next sweep reads from there anyway"
	default:
		p.Rescan(req.From, r.rescans.Inc)
		rep.Accepted, rep.Watermark = true, m.Watermark
		rep.Message = fmt.Sprintf("the next sweep reads from %s to now against the snapshot and publishes only differences", req.From.UTC().Format(time.RFC3339))
		r.log.Info("rescan requested", "from", req.From.UTC().Format(time.RFC3339), "to", req.To.UTC().Format(time.RFC3339), "watermark", m.Watermark.Format(time.RFC3339))
	}
	return rep
}
