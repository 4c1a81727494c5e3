package replica

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/state"
)

// The group's limits: what binds the shop's calls (the waits the service
// asked for, the sessions that may be open, the call budget) reaches the
// group when it changes, not with the next checkpoint (written only after
// a verified sweep with an empty outbox: a 429 or a spent daily quota
// blocks the sweep, and a long first sync writes none for minutes).
//
//   - Written through: a save of a record named in Config.Limits (through
//     Records) writes the group's key <Key>.limits of the checkpoint
//     bucket before the save returns, so before the caller's next call;
//     a write that fails is tried again at once (a few times within 2 s),
//     then in the background while active.
//   - Merged, never overwritten: a write reads the group's value and
//     merges it with this replica's records (Config.Merges: a wait only
//     lengthens, a budget only spends), then writes on that revision,
//     whoever wrote it last (the active's next save merges what another
//     replica added since, before its components have absorbed it). So
//     any replica, even one past its lease's deadline (a call answered
//     late), adds what it learned without undoing another's: the write is
//     not gated by the lease.
//   - Applied first: a replica that takes over merges the group's value
//     into its state file before the tenure's first checkpoint, before
//     anything of its own is written (mirror.Config.BeforeTenure); a
//     takeover that fails or is interrupted leaves the group's value as
//     it was, and the next one merges it again.
//   - Kept until written: a record saved through Records is first added
//     to the state file's record UnsentRecord (before the component's
//     own save), removed once a write of the group's limits holds it.
//     Every restore of a checkpoint (a demotion's rewind, a takeover, a
//     standby following the active) merges it into the restored record
//     instead of letting the checkpoint's replace it, and the replica
//     writes it to the group while it is a standby too: a wait the
//     service announced to this process whose write failed survives a
//     restart between the failure and the rewind, and reaches the group.
//   - On one clock: a record's times are the writer's wall clock. The
//     reader moves them onto its own by the NATS server's stamps (each
//     entry's creation time): the writer's offset to the server is at
//     most the value's stamp less its Written, the reader's at least the
//     server's time it last saw (lease.ServerNow) less its own; the
//     difference moves every time later, never earlier, whatever the two
//     wall clocks say.

// Limit says how the group's copy of a record of Config.Limits combines
// with a replica's own.
type Limit struct {
	// Shift moves the record's wall-clock times by d (from another
	// replica's clock onto this one's).
	Shift func(rec json.RawMessage, d time.Duration) (json.RawMessage, error)
	// Merge combines this replica's value (nil: none) with the group's,
	// both on this replica's clock, at now: the result binds at least as
	// much as each. groupLater says that the group's is a later state of
	// the value own was restored from (it may replace it). An error says
	// that the group's does not decode: own is kept.
	Merge func(own, group json.RawMessage, groupLater bool, now time.Time) (json.RawMessage, error)
	// Checkpointed: a save also makes the next verified sweep's checkpoint
	// due, for a record whose later value no merge can tell (the sealed
	// session: without Merge, another replica's write of the group's
	// limits since makes a takeover keep the checkpoint's).
	Checkpointed bool
}

// limitsValue is the value of the limits key.
type limitsValue struct {
	Writer  lease.Writer               `json:"writer"`
	Written time.Time                  `json:"written"` // the writer's wall clock, before the write
	Records map[string]json.RawMessage `json:"records"`
}

// groupLimits is the limits key as read.
type groupLimits struct {
	v     limitsValue
	found bool      // a value that decodes
	rev   uint64    // the revision to write on (0: create)
	stamp time.Time // when the server stored it
}

// RecordStore is where a component keeps its records (*state.Store).
type RecordStore interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (found bool, err error)
}

// Records returns s with the group told of every save of a record named
// in Config.Limits before the save returns: pass it to the components
// that save them (the client's waits and sessions, the poller's budget).
func (r *Replica) Records(s RecordStore) RecordStore { return notifying{s, r} }

type notifying struct {
	RecordStore
	r *Replica
}

func (n notifying) SaveRecord(name string, v any) error {
	if !slices.Contains(n.r.cfg.Limits, name) {
		err := n.RecordStore.SaveRecord(name, v)
		if err == nil {
			n.r.fresh.Store(true) // only a checkpoint carries it to the group
		}
		return err
	}
	err := n.r.saveKept(n.RecordStore, name, v)
	if err == nil {
		if n.r.cfg.Merges[name].Checkpointed {
			n.r.fresh.Store(true)
		}
		if a, ok := v.(Absorber); ok {
			n.r.absorbers.Store(name, a)
		}
		n.r.writeThrough()
	}
	return err
}

// recordsSaver is a RecordStore that saves several records in one
// transaction (*state.Store).
type recordsSaver interface {
	SaveRecords(recs ...state.Record) error
}

// UnsentRecord is the state file's record of what was saved through
// Records and is not yet in the group's limits (name → value, on this
// process's clock): this file's own (never replaced by a checkpoint).
const UnsentRecord = "replica.unsent"

// saveKept saves the record name to s and keeps it, in memory and in the
// state file (UnsentRecord), until a write of the group's limits holds it:
// kept in the same transaction as the record when s can (one write of the
// state file per save), else first, so that a process that dies after the
// save and before the group's write still has it at its restart.
func (r *Replica) saveKept(s RecordStore, name string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return s.SaveRecord(name, v)
	}
	r.limMu.Lock()
	defer r.limMu.Unlock()
	if r.unsent == nil {
		r.unsent = map[string]json.RawMessage{}
	}
	r.unsent[name] = raw
	if both, ok := s.(recordsSaver); ok {
		return both.SaveRecords(state.Record{Name: name, Value: v}, state.Record{Name: UnsentRecord, Value: r.unsent})
	}
	if err := r.cfg.Store.SaveRecord(UnsentRecord, r.unsent); err != nil {
		r.log.Warn("a record of the group's limits could not be kept until it is written to the group", "record", name, "err", err)
	}
	return s.SaveRecord(name, v)
}

// sent forgets what a write of the group's limits now holds, in memory
// and in the state file. (Left for the next save to rewrite, the record
// outlived a kill: written back at the restart as the base of a merge, its
// level of hours ago refunded what the group spent since; see adds.)
// Called under limMu.
func (r *Replica) sent() {
	if r.unsent == nil {
		return
	}
	r.unsent = nil
	if err := r.cfg.Store.SaveRecord(UnsentRecord, nil); err != nil {
		r.log.Warn("the state file's record of the limits not yet written to the group could not be cleared", "err", err)
	}
}

// loadUnsent reads what an earlier process on this state file saved
// through Records and may not have written to the group (sent).
func (r *Replica) loadUnsent() {
	var unsent map[string]json.RawMessage
	if found, err := r.cfg.Store.LoadRecord(UnsentRecord, &unsent); err != nil || !found || len(unsent) == 0 {
		return
	}
	r.limMu.Lock()
	r.unsent = unsent
	r.limMu.Unlock()
	names := make([]string, 0, len(unsent))
	for name := range unsent {
		names = append(names, name)
	}
	slices.Sort(names)
	r.log.Info("records of the group's limits an earlier process on this state file kept, not known to be in the group: written to it now", "records", names)
	r.pokeLimits()
}

// withUnsent is own with the records not yet written to the group merged
// in (on this process's clock: not shifted). Called under limMu.
func (r *Replica) withUnsent(own map[string]json.RawMessage) map[string]json.RawMessage {
	l := r.lease.Load()
	if len(r.unsent) == 0 || l == nil {
		return own
	}
	return r.merge(own, groupLimits{v: limitsValue{Writer: l.Writer(), Records: r.unsent}, found: true}, false)
}

// restoreRecord is the restore's merge (mirror.Config.Merge) of a record
// of Config.Limits: the checkpoint cp's, moved onto this replica's clock,
// merged with this file's value not yet written to the group
// (UnsentRecord), if any. Other records: the checkpoint's.
func (r *Replica) restoreRecord(cp lease.Checkpoint, name string, ckpt json.RawMessage, file func(string) json.RawMessage) (json.RawMessage, bool) {
	if !slices.Contains(r.cfg.Limits, name) {
		return nil, false
	}
	var unsent map[string]json.RawMessage
	if raw := file(UnsentRecord); raw != nil {
		_ = json.Unmarshal(raw, &unsent) // not decodable: nothing kept
	}
	mine := unsent[name]
	if ckpt == nil || !json.Valid(ckpt) {
		return mine, mine != nil || ckpt == nil
	}
	theirs := r.shifted(map[string]json.RawMessage{name: ckpt}, r.shiftOf(cp.Writer(), cp.Stamp, cp.Written))[name]
	if mine == nil {
		return theirs, true
	}
	return r.mergeRecord(name, mine, theirs, true, false, r.now())
}

// Absorber is a record's value, saved through Records, that takes the
// group's merged record back into the running component that saved it
// (poller.BudgetState: the running budget). When another replica adds to
// the group's limits, the active's follower calls AbsorbGroup of the
// value last saved of each record that changed (its own records stay in
// the state file until the component saves again); AbsorbGroup must be
// safe for concurrent use with the component.
type Absorber interface {
	AbsorbGroup(merged json.RawMessage)
}

func (r *Replica) limitsKey() string { return r.Key() + ".limits" }

// writeThrough writes the group's limits now, before the save returns
// (so before the caller's next call): a write that fails is tried again
// at once, a few times within a bound; only then is it left to the
// background writer. After such a failure (NATS that does not answer
// must not slow every save down) a save tries once, within a shorter
// bound, for a few seconds.
func (r *Replica) writeThrough() {
	if r.lease.Load() == nil {
		r.pokeLimits()
		return
	}
	tries, bound := 3, 2*time.Second
	if time.Now().UnixNano() < r.limitsQuiet.Load() {
		tries, bound = 1, 500*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var err error
	for try := 0; try < tries && ctx.Err() == nil; try++ {
		if err = r.writeLimits(ctx); err == nil {
			r.limitsQuiet.Store(0)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try+1) * 20 * time.Millisecond):
		}
	}
	r.limitsQuiet.Store(time.Now().Add(5 * time.Second).UnixNano())
	r.log.Warn("writing the group's limits (waits, sessions, budget) failed; retried in the background", "err", err)
	r.pokeLimits()
}

func (r *Replica) pokeLimits() {
	select {
	case r.limits <- struct{}{}:
	default:
	}
}

// startLimits writes the group's limits again, while this replica is
// active, after a write that failed.
func (r *Replica) startLimits(ctx context.Context) (stop func()) {
	return background(ctx, func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.limits:
			}
			for ctx.Err() == nil {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := r.writeLimits(wctx)
				cancel()
				if err == nil {
					r.limitsQuiet.Store(0)
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(r.cfg.Retry):
				}
			}
		}
	})
}

// writeLimits merges this replica's records of Config.Limits into the
// group's limits key (with any replica: the lease does not gate it).
func (r *Replica) writeLimits(ctx context.Context) error {
	l := r.lease.Load()
	if len(r.cfg.Limits) == 0 || l == nil || r.ckv == nil {
		return nil
	}
	r.limMu.Lock()
	defer r.limMu.Unlock()
	own, err := r.loadLimits()
	if err != nil {
		return err
	}
	// Until its takeover merged the group's limits (tenured), a replica
	// holding the lease is a standby here: its file's records may be hours
	// old (a restart waiting for its turn, Config.Takeovers).
	active := l.Active() && r.tenured.Load()
	if active {
		own = r.withUnsent(own)
	} else {
		// A standby's records are the group's checkpoint's: only what it
		// learned itself is its to add, as it saved it (merged into none,
		// a sessions record would name no client: merged with another
		// such, the other's sessions are dropped, plenty.MergeSessions).
		own = map[string]json.RawMessage{}
		for _, name := range r.cfg.Limits {
			if raw, ok := r.unsent[name]; ok {
				own[name] = raw
			}
		}
		if len(own) == 0 {
			return nil
		}
	}
	me := l.Writer()
	for try := 0; ; try++ {
		g, err := r.readGroup(ctx)
		if err != nil {
			return err
		}
		// Merged whoever wrote last, this replica too: what another
		// merged in since (a wait, a session, calls it spent) is not in
		// this replica's own records until its components absorb it.
		recs := own
		if g.found {
			recs = r.merge(own, g, false)
		}
		if !active && g.found && g.v.Writer.File != me.File && !r.adds(own, g) {
			r.sent()
			return nil
		}
		err = r.putLimits(ctx, me, recs, g.rev)
		if err == nil {
			r.sent()
		}
		if err == nil || !conflict(err) || try >= 4 {
			return err
		}
	}
}

// adds says whether a standby's records (own: what it saved itself,
// UnsentRecord) add anything to the group's g, written by another state
// file's replica: merged into the group's, do they change it? A process
// killed between the group's write and the clearing of its record (sent)
// leaves in its state file what the group already has; written again at
// its restart, merged as the base (its level of hours ago, with all the
// refill since, the bucket's cap ignored: MergeBudget), it would refund
// what the group's active spent since, and the group's value would no
// longer be the active's, whose later state a takeover takes over a
// checkpoint's (applyGroupLimits). Called under limMu.
func (r *Replica) adds(own map[string]json.RawMessage, g groupLimits) bool {
	l := r.lease.Load()
	base := r.shifted(g.v.Records, r.shiftOf(g.v.Writer, g.stamp, g.v.Written))
	as := func(recs map[string]json.RawMessage) groupLimits {
		return groupLimits{v: limitsValue{Writer: l.Writer(), Records: recs}, found: true}
	}
	same, with := r.merge(base, as(base), false), r.merge(base, as(own), false)
	if len(with) != len(same) {
		return true
	}
	for name, raw := range with {
		if string(raw) != string(same[name]) {
			return true
		}
	}
	return false
}

// applyGroupLimits is the takeover's step before the tenure's first
// checkpoint (mirror.Config.BeforeTenure): the group's limits merged into
// the state file (restored: the checkpoint it now holds, its records
// moved onto this replica's clock and merged with what was not yet
// written by the restore, restoreRecord), and written back (by the
// limits' writer, startLimits).
func (r *Replica) applyGroupLimits(ctx context.Context, restored *lease.Checkpoint) error {
	l := r.lease.Load()
	if len(r.cfg.Limits) == 0 || l == nil {
		return nil
	}
	if !r.clockRead.Swap(false) {
		_, _, _ = l.Holder(ctx) // a fresh reading of the server's clock
	}
	r.limMu.Lock()
	defer r.limMu.Unlock()
	own, err := r.loadLimits()
	if err != nil {
		return err
	}
	// Read now, not with the takeover's reads at its start: a replica past
	// its tenure (a 429 answered late) may have written to the group since
	// (the mirror's catch-up and restore take seconds on a loaded
	// machine), and this replica's follower of the limits sees only what
	// is written after the takeover (TestWaitWrittenDuringTheTakeoverIsHonoured).
	g, err := r.readGroup(ctx)
	if err != nil {
		return err
	}
	merged := own
	if g.found {
		later := restored != nil && g.v.Writer == restored.Writer() && g.v.Written.After(restored.Written)
		merged = r.merge(own, g, later)
		r.log.Info("the group's limits (waits, sessions, budget) merged into this replica's before its first call",
			"writer", g.v.Writer.Instance, "written", g.v.Written.Format(time.RFC3339Nano), "later_than_the_checkpoint", later)
	}
	// What this file has not written to the group yet, merged last: a
	// group's value later than the checkpoint replaces the restored one,
	// and lacks it (TestTakeoverKeepsItsUnsentSpendUnderALaterGroupBudget).
	merged = r.withUnsent(merged)
	if err := r.saveLimits(merged); err != nil {
		return err
	}
	r.tenured.Store(true)
	// Written back by the limits' writer, not before the first call: the
	// merge took the group's value, so the group lacks only what this
	// file had not written yet (UnsentRecord, kept until that write).
	r.pokeLimits()
	return nil
}

// prefetchClock reads the server's clock for the takeover's
// applyGroupLimits, at once with the mirror's own reads
// (mirror.Config.Prefetch): a read that fails is made again there. (The
// group's limits are read there: they may change during the takeover.)
func (r *Replica) prefetchClock(ctx context.Context) {
	l := r.lease.Load()
	if len(r.cfg.Limits) == 0 || l == nil || r.ckv == nil {
		return
	}
	_, found, err := l.Holder(ctx)
	r.clockRead.Store(err == nil && found)
}

// saveLimits saves the records of Config.Limits found in recs, in one
// transaction when the store can. Called under limMu.
func (r *Replica) saveLimits(recs map[string]json.RawMessage) error {
	var out []state.Record
	for _, name := range r.cfg.Limits {
		if raw, ok := recs[name]; ok {
			out = append(out, state.Record{Name: name, Value: raw})
		}
	}
	if both, ok := r.cfg.Store.(recordsSaver); ok {
		return both.SaveRecords(out...)
	}
	for _, rec := range out {
		if err := r.cfg.Store.SaveRecord(rec.Name, rec.Value); err != nil {
			return err
		}
	}
	return nil
}

// LimitsApplier is a Pipeline that applies the group's limits while it
// runs: GroupLimits reads the records of Config.Limits from the state
// file again into the running workers (the client's waits). The active
// replica calls it when another replica added to the group's limits
// during its tenure (a 429 answered to a replica past its deadline, after
// this one took over); a Pipeline without it honours such a wait from
// its next takeover or restart on.
type LimitsApplier interface {
	GroupLimits()
}

// followLimits merges what other replicas write to the group's limits
// while this one is active into its state file and, for a LimitsApplier,
// into its running workers, as it is written: through the process's feed
// (Config.LimitsFeed, one watch for all its replicas), else a watch of
// the key of its own.
func (r *Replica) followLimits(ctx context.Context, p Pipeline) (stop func()) {
	ap, applies := p.(LimitsApplier)
	take := func(e jetstream.KeyValueEntry) {
		if e.Operation() == jetstream.KeyValuePut && r.adopt(e) && applies {
			ap.GroupLimits()
		}
	}
	if f := r.cfg.LimitsFeed; f != nil {
		return f.follow(r.limitsKey(), take)
	}
	return background(ctx, func(ctx context.Context) { watchUpdates(ctx, r.ckv, r.limitsKey(), r.cfg.Retry, take) })
}

// adopt merges a value of the limits key written by another replica into
// this replica's records; it says whether any changed.
func (r *Replica) adopt(e jetstream.KeyValueEntry) bool {
	l := r.lease.Load()
	var v limitsValue
	if l == nil || json.Unmarshal(e.Value(), &v) != nil || v.Writer == l.Writer() {
		return false
	}
	l.NoteServerTime(e.Created())
	r.limMu.Lock()
	defer r.limMu.Unlock()
	own, err := r.loadLimits()
	if err != nil {
		return false
	}
	changed := false
	for name, raw := range r.merge(own, groupLimits{v: v, found: true, stamp: e.Created()}, false) {
		if string(raw) == string(own[name]) {
			continue
		}
		if a, ok := r.absorbers.Load(name); ok {
			a.(Absorber).AbsorbGroup(raw)
		}
		if err := r.cfg.Store.SaveRecord(name, raw); err != nil {
			r.log.Warn("the group's limits written by another replica could not be saved", "record", name, "err", err)
			continue
		}
		changed = true
	}
	if changed {
		r.log.Info("another replica added to the group's limits during this tenure: merged", "writer", v.Writer.Instance)
	}
	return changed
}

// loadLimits reads this replica's records of Config.Limits.
func (r *Replica) loadLimits() (map[string]json.RawMessage, error) {
	own := map[string]json.RawMessage{}
	for _, name := range r.cfg.Limits {
		var raw json.RawMessage
		found, err := r.cfg.Store.LoadRecord(name, &raw)
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			// Not JSON (a damaged file): its owner ignores it too; the
			// group's copy, if any, takes its place.
			r.log.Warn("an unreadable record of the state file is left out of the group's limits", "record", name, "err", err)
			continue
		}
		if err != nil {
			return nil, err
		}
		if found {
			own[name] = raw
		}
	}
	return own, nil
}

// readGroup reads the limits key; a value that does not decode is
// reported and overwritten by the next write.
func (r *Replica) readGroup(ctx context.Context) (groupLimits, error) {
	e, err := r.ckv.Get(ctx, r.limitsKey())
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return groupLimits{}, nil
	}
	if err != nil {
		return groupLimits{}, fmt.Errorf("group limits %s: %w", r.limitsKey(), err)
	}
	if l := r.lease.Load(); l != nil {
		l.NoteServerTime(e.Created())
	}
	g := groupLimits{rev: e.Revision(), stamp: e.Created()}
	if err := json.Unmarshal(e.Value(), &g.v); err != nil {
		r.log.Warn("the group's limits do not decode: this replica's own are used and written over them", "key", r.limitsKey(), "err", err)
		return g, nil
	}
	g.found = true
	return g, nil
}

// putLimits writes recs as the group's limits on revision rev (0: a new
// key).
func (r *Replica) putLimits(ctx context.Context, me lease.Writer, recs map[string]json.RawMessage, rev uint64) error {
	b, _ := json.Marshal(limitsValue{Writer: me, Written: r.now().UTC(), Records: recs})
	var err error
	if rev == 0 {
		_, err = r.ckv.Create(ctx, r.limitsKey(), b)
	} else {
		_, err = r.ckv.Update(ctx, r.limitsKey(), b, rev)
	}
	if err != nil {
		return fmt.Errorf("group limits %s: %w", r.limitsKey(), err)
	}
	if rev == 0 {
		// No limits key: a first write, or the checkpoint bucket was
		// created again (and its checkpoint is gone too).
		r.fresh.Store(true)
	}
	return nil
}

func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) ||
		errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
}

// shiftFrom is how far times of a value written at written (the writer's
// wall clock) and stored by the server at stamp move onto this replica's
// clock: at least the true difference of the two clocks (see above).
func (r *Replica) shiftFrom(stamp, written time.Time) time.Duration {
	if stamp.IsZero() || written.IsZero() {
		return 0 // an older value: its times as written
	}
	server := stamp // the value was stored before it was read: a lower bound
	if l := r.lease.Load(); l != nil {
		if at, ok := l.ServerNow(); ok && at.After(server) {
			server = at
		}
	}
	return stamp.Sub(written) - server.Sub(r.now())
}

// shifted moves every record of recs that has a Shift by d.
func (r *Replica) shifted(recs map[string]json.RawMessage, d time.Duration) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(recs))
	for name, raw := range recs {
		out[name] = raw
		if lim, ok := r.cfg.Merges[name]; ok && lim.Shift != nil && d != 0 {
			if s, err := lim.Shift(raw, d); err == nil {
				out[name] = s
			}
		}
	}
	return out
}

// merge combines this replica's records with the group's g (moved onto
// this replica's clock); groupLater: g is a later state of own's.
func (r *Replica) merge(own map[string]json.RawMessage, g groupLimits, groupLater bool) map[string]json.RawMessage {
	group := r.shifted(g.v.Records, r.shiftOf(g.v.Writer, g.stamp, g.v.Written))
	out := make(map[string]json.RawMessage, len(r.cfg.Limits))
	now := r.now()
	for _, name := range r.cfg.Limits {
		mine, have := own[name]
		theirs, ok := group[name]
		if !ok {
			if have {
				out[name] = mine
			}
			continue
		}
		if m, keep := r.mergeRecord(name, mine, theirs, have, groupLater, now); keep {
			out[name] = m
		}
	}
	return out
}

// mergeRecord combines this replica's record name (mine; have: it has
// one) with the group's (theirs, on this replica's clock); keep false:
// none.
func (r *Replica) mergeRecord(name string, mine, theirs json.RawMessage, have, groupLater bool, now time.Time) (json.RawMessage, bool) {
	switch lim, merges := r.cfg.Merges[name]; {
	case merges && lim.Merge != nil:
		m, err := lim.Merge(mine, theirs, groupLater, now)
		if err != nil {
			r.log.Warn("the group's record does not decode: this replica's is kept", "record", name, "err", err)
			return mine, have
		}
		return m, true
	case groupLater || !have:
		return theirs, json.Valid(theirs)
	default:
		return mine, true
	}
}

// shiftOf is how far times written by w (stored by the server at stamp,
// written at written on w's wall clock) move onto this replica's clock:
// none for this process's own (its clock already; moved, its waits would
// be new ones at every save).
func (r *Replica) shiftOf(w lease.Writer, stamp, written time.Time) time.Duration {
	if l := r.lease.Load(); l != nil && w.Nonce == l.Writer().Nonce && w.Instance == l.Writer().Instance {
		return 0
	}
	return r.shiftFrom(stamp, written)
}
