package plenty

import (
	"log/slog"
	"time"
)

// WaitsRecord is the name of the record of the pending wait the service
// asked for: the client saves it whenever the wait changes and restores
// it when it is built (Config.Waits), so that a restarted process (or a
// replica that takes over with the group's state) makes no call before it
// ends.
const WaitsRecord = "waits"

// WaitRecords keeps the pending wait across restarts (implemented by
// *state.Store). A missing or unreadable record is read as no wait.
type WaitRecords interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (found bool, err error)
}

// waitsRecord is the JSON of the record "waits" (none pending: empty).
type waitsRecord struct {
	Waits []Wait `json:"waits"`
}

// LoadWaits reads the record of the waits (found: there is one).
func LoadWaits(r WaitRecords) (waits []Wait, found bool, err error) {
	var wr waitsRecord
	found, err = r.LoadRecord(WaitsRecord, &wr)
	return wr.Waits, found, err
}

// SaveWait saves w as the pending wait (none: the zero Wait).
func SaveWait(r WaitRecords, w Wait) error {
	rec := waitsRecord{Waits: []Wait{}}
	if !w.Until.IsZero() {
		rec.Waits = append(rec.Waits, w)
	}
	return r.SaveRecord(WaitsRecord, rec)
}

// PendingWait is the wait in force at now among waits a previous process
// persisted, each for what Remaining says is left of it (false when none
// is left): what Pacer.Restore binds a pacer by, without a pacer.
func PendingWait(now time.Time, waits ...Wait) (Wait, bool) {
	var in Wait
	for _, w := range waits {
		d := w.Remaining(now)
		if d <= 0 {
			continue
		}
		if w.Until = now.Add(d); w.Until.After(in.Until) {
			in = w
		}
	}
	return in, !in.Until.IsZero()
}

// waitSaver is the pacer's OnWait with the save of the record in front: a
// failure is logged when saving starts to fail, and the next save that
// works is logged too.
func waitSaver(r WaitRecords, log *slog.Logger, next func(Wait)) func(Wait) {
	failing := false
	return func(w Wait) {
		err := SaveWait(r, w)
		if now := err != nil; now != failing {
			failing = now
			if failing {
				log.Warn("could not persist the service's wait; a restart continues from the last saved state", "record", WaitsRecord, "err", err)
			} else {
				log.Info("the service's wait is persisted again", "record", WaitsRecord)
			}
		}
		if next != nil {
			next(w)
		}
	}
}

// restoreWaits binds the pacer by the waits of the record.
func restoreWaits(p *Pacer, r WaitRecords, log *slog.Logger) {
	waits, found, err := LoadWaits(r)
	if err != nil {
		log.Warn("record of the service's waits unreadable: none assumed", "err", err)
		return
	}
	if !found {
		return
	}
	if w, ok := p.Restore(waits...); ok {
		log.Warn("a wait the service asked for before the restart is still pending: no call before it ends",
			"until", w.Until.UTC().Format(time.RFC3339), "reason", string(w.Reason), "why", w.Why)
	}
}
