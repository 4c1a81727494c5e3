package poller

import (
	"time"
)

// rescanRequest is a rescan waiting for the end of a sweep.
type rescanRequest struct {
	from    time.Time
	applied func()
}

// Rescan asks Run to read the period from `from` again against the
// snapshot: the watermark is rewound to it before the next sweep starts
// (between two sweeps, so that no sweep in flight moves it forward again),
// and the sweeps that follow read from there to now, publishing only real
// differences. applied, when set, is called once the watermark is rewound.
// A later request replaces one not applied yet.
func (p *Poller) Rescan(from time.Time, applied func()) {
	p.rescan.Store(&rescanRequest{from: from, applied: applied})
}

// applyRescan rewinds the watermark for a pending rescan request (Run,
// before each sweep).
func (p *Poller) applyRescan() {
	req := p.rescan.Swap(nil)
	if req == nil {
		return
	}
	if err := p.store.RewindWatermark(req.from); err != nil {
		p.log.Error("rescan: rewinding the watermark failed", "err", err)
		return
	}
	if req.applied != nil {
		req.applied()
	}
	p.log.Info("rescan: watermark rewound; the sweeps read the period again", "to", req.from.UTC().Format(time.RFC3339))
}
