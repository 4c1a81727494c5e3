// Package mirror keeps a standby replica's state file warm without a call
// to the shop: NATS stream -> mirror -> state (snapshot only).
//
//   - Events: every event of the group's subjects carries the order's
//     tracked state after the change (data.after); the mirror reads the
//     stream from its last applied sequence (follow: direct gets of the
//     next event, a backlog by an ordered consumer) and writes those
//     states into the snapshot, in batches, each with the sequence it
//     reached (one transaction). A state older than the stored
//     one is skipped, so reading a stretch again never moves an order back.
//   - Snapshot dumps: what the active stores without an event (the
//     baseline of the first sync, updatedAt-only changes, orders outside
//     the scope) is not in the stream; the active therefore writes its whole
//     snapshot to a JetStream object store after its first verified sweep
//     of a tenure and then every DumpEvery, at a moment its outbox is empty,
//     with the stream sequence read before (every event up to it is in the
//     dump). A standby loads each new dump and mirrors on from its sequence.
//   - Checkpoints (lease.Checkpoints): the active's bookkeeping and
//     records; a standby writes each new one into its state file.
//
// When a replica stops being active, Demoted undoes its unpublished outbox
// (state.RevertOutbox) and rewinds it to the group's last checkpoint: the
// next active reads that period again and publishes what was missing.
package mirror

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/shopid"
	"github.com/orderwatch/orderwatch/state"
)

// RecordName is the mirror's record in the state file: this replica's own
// (never taken from a checkpoint).
const RecordName = "replica"

// Record is this replica's position: its state file's random id, the
// lease tenure it last held (the lease revision it began at and the
// holding process's nonce: together they name the writer of that tenure's
// checkpoints), the last stream sequence its snapshot reflects in which
// incarnation of the stream, and the dump it loaded last.
type Record struct {
	File string `json:"file"`
	// Lock is the identity of the file File was given to (its device and
	// inode, Config.Lock): a copy of the file (a cloned volume, a restored
	// backup) carries File but sits in another file, and is given a new
	// File (New): it never passes for the tenure of the file it copies.
	Lock string `json:"lock,omitempty"`
	// Gen counts the checkpoints this file wrote (one more before each:
	// the checkpoint carries it, in its copy of this record). A file
	// whose Gen is below that of the group's checkpoint it wrote is an
	// older copy of itself (a backup restored in place: the same inode)
	// and never continues its tenure (Continues).
	Gen   uint64 `json:"gen,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	Nonce string `json:"nonce,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	// Stream is the stream's creation time (server clock): a stream
	// deleted and created again restarts its sequences at 1.
	Stream time.Time `json:"stream,omitzero"`
	Dump   string    `json:"dump,omitempty"`
	// Unproven says why the snapshot may miss events of the group (the
	// stream was created again, or lost events before this replica read
	// them); empty once a dump covering the stream was loaded or written.
	Unproven string `json:"unproven,omitempty"`
}

// Store is what the mirror needs of the state file (*state.Store).
type Store interface {
	LoadRecord(name string, v any) (bool, error)
	SaveRecord(name string, v any) error
	ApplyMirrored(states []state.Mirrored, recs ...state.Record) error
	RestoreWith(c state.Checkpoint, p state.Restore) error
	Checkpoint() (state.Checkpoint, bool, error)
	RevertOutbox(undo func(state.OutboxEntry) (state.Undo, error)) (int, error)
	DumpOrders(w io.Writer) (int, error)
	LoadOrders(r io.Reader, recs ...state.Record) (int, error)
}

var _ Store = (*state.Store)(nil)

// Config configures a Mirror.
type Config struct {
	JS            jetstream.JetStream
	Stream        string
	SubjectPrefix string
	Store         Store
	Checkpoints   *lease.Checkpoints
	Dumps         jetstream.ObjectStore
	Key           string // the group's key (lease.Key): the dump's object name
	// Shop is the shop's id (package shopid): only events whose
	// Orderwatch-Shop header names it are applied; an event without the
	// header (published before shop ids) only when its CloudEvents source
	// is Source. Empty Shop: every event of the subjects is applied.
	Shop, Source string
	// Own names the records of the state file that belong to this replica's
	// own file (besides RecordName) and that a checkpoint never replaces,
	// e.g. the publisher's send mark, which counts this file's outbox.
	Own []string
	// Lock is the identity of the state file this process holds open
	// (state.Store.LockID; "" unknown): the record's lineage (Record.Lock).
	Lock      string
	DumpEvery time.Duration // [5m]
	Batch     int           // events per transaction [512]
	Logger    *slog.Logger
	// OnApplied is called after every applied batch: events applied.
	OnApplied func(n int)
	// BeforeTenure, when set, is called by Takeover once the state file
	// holds what the tenure starts from and before the tenure's first
	// checkpoint (before anything of the tenure is written to the group):
	// with the group's checkpoint it restored, or nil when the file
	// continues as it is. An error fails the takeover.
	BeforeTenure func(ctx context.Context, restored *lease.Checkpoint) error
	// Prefetch, when set, is called when a takeover begins, at the same
	// time as the takeover's own reads (prefetch): the reads BeforeTenure
	// will need, made at once with them.
	Prefetch func(ctx context.Context)
	// Merge, when set, is asked about every record (not Own) at each
	// restore of a checkpoint cp (state.Restore.Merge: in the restore's
	// transaction): the group's limits the file knows and the group may
	// not (package replica) are merged, not replaced.
	Merge func(cp lease.Checkpoint, name string, ckpt json.RawMessage, file func(name string) json.RawMessage) (json.RawMessage, bool)
}

// Mirror is one replica's link to the group's stream, checkpoints and dumps.
type Mirror struct {
	cfg Config
	log *slog.Logger

	writing  sync.Mutex // one Committed at a time
	mu       sync.Mutex
	rec      Record
	lastDump time.Time // the active's last dump in this tenure
	dumped   bool
	dumpedIn time.Time // the stream incarnation (creation) of that dump
	stream   time.Time // the stream incarnation at the active's last checkpoint

	lag      atomic.Int64 // events behind the stream; -1 unknown
	caughtAt atomic.Int64 // unix nanos of the last time the mirror had read everything
	// ckpt names the checkpoint applied or written last: its revision
	// and writer (revisions start at 1 again in a bucket created again).
	ckpt atomic.Value // string
	// applied is the checkpoint ApplyCheckpoint wrote into the file last.
	applied atomic.Pointer[lease.Checkpoint]
	// pre are the reads of the takeover in progress (prefetch), nil
	// outside one.
	pre atomic.Pointer[takeoverReads]
}

// New loads (or creates) this replica's record.
func New(cfg Config) (*Mirror, error) {
	if cfg.DumpEvery <= 0 {
		cfg.DumpEvery = 5 * time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 512
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{cfg: cfg, log: cfg.Logger.With("component", "mirror")}
	m.lag.Store(-1)
	found, err := cfg.Store.LoadRecord(RecordName, &m.rec)
	switch {
	case err != nil || !found || m.rec.File == "":
		// Unreadable or missing: nothing known; a new id for this file.
		m.rec = Record{File: newFileID(), Lock: cfg.Lock}
	case cfg.Lock != "" && m.rec.Lock != "" && m.rec.Lock != cfg.Lock:
		m.log.Warn("this state file is a copy of another one (a cloned volume, a moved or restored backup): it is given its own id and, as the active, restores the group's checkpoint instead of continuing the tenure it was copied from",
			"file_id_of_the_original", m.rec.File, "lock_of_the_original", m.rec.Lock, "lock", cfg.Lock)
		m.rec.File, m.rec.Lock, m.rec.Epoch, m.rec.Nonce = newFileID(), cfg.Lock, 0, ""
	case m.rec.Lock == "" && cfg.Lock != "":
		m.rec.Lock = cfg.Lock // a record of an earlier version: its lineage starts here
	default:
		return m, nil
	}
	if err := cfg.Store.SaveRecord(RecordName, m.rec); err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return m, nil
}

// newFileID is a random id for a state file.
func newFileID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// File is the state file's random id (lease.Config.File).
func (m *Mirror) File() string { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.File }

// Epoch is the lease tenure this replica held last (0: none known).
func (m *Mirror) Epoch() uint64 { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.Epoch }

// Seq is the last stream sequence the snapshot reflects.
func (m *Mirror) Seq() uint64 { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.Seq }

// Unproven says why this replica cannot prove that its snapshot holds
// every event of the group ("" when it can): the stream was deleted and
// created again, or lost events before this replica read them, and no
// dump of the active covering the stream has been loaded since. A replica
// that takes over then (Takeover logs it) publishes, for an order changed
// in the gap, an event whose "before" is its older state. Cleared when
// such a dump is loaded, or written by this replica as the active.
func (m *Mirror) Unproven() string { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.Unproven }

// Lag is the number of the group's events in the stream not yet applied
// (-1 before the mirror first looked).
func (m *Mirror) Lag() int64 { return m.lag.Load() }

// CaughtUp says whether the mirror read everything within the last d.
func (m *Mirror) CaughtUp(d time.Duration) bool {
	at := m.caughtAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) <= d
}

func (m *Mirror) save(change func(*Record)) error {
	m.mu.Lock()
	change(&m.rec)
	rec := m.rec
	m.mu.Unlock()
	return m.cfg.Store.SaveRecord(RecordName, rec)
}

func (m *Mirror) own(name string) bool { return name == RecordName || slices.Contains(m.cfg.Own, name) }

// Activated records the tenure that begins (after the takeover's
// catch-up): w is the lease's Writer.
func (m *Mirror) Activated(w lease.Writer) error {
	return m.save(m.activate(w))
}

// activate is Activated's change of the record (with m.mu held).
func (m *Mirror) activate(w lease.Writer) func(*Record) {
	return func(r *Record) { r.Epoch, r.Nonce = w.Epoch, w.Nonce; m.dumped = false }
}

// Takeover brings the state file to the group's newest state before this
// replica, now holding the lease, calls the shop: at the process's start,
// when the latest checkpoint is its own (or none exists) nothing is to do;
// otherwise its own unpublished outbox is undone, the newest dump and the
// stream are applied to the end, and the latest checkpoint written. Then
// BeforeTenure; the tenure is recorded last. restored says whether the state file now holds
// the group's state (the components that read it must read it again).
func (m *Mirror) Takeover(ctx context.Context, l *lease.Lease, atStart bool) (restored bool, err error) {
	// The group's checkpoint is read once (Continues, Demoted and
	// ApplyCheckpoint each read it): this replica holds the lease.
	defer m.cfg.Checkpoints.Memo()()
	defer m.prefetch(ctx)()
	if atStart {
		cont, err := m.Continues(ctx)
		if err != nil {
			return false, err
		}
		if cont {
			if err := m.beforeTenure(ctx, nil); err != nil {
				return false, err
			}
			return false, m.Activated(l.Writer())
		}
		if err := m.Demoted(ctx); err != nil {
			return false, err
		}
	}
	if err := m.CatchUp(ctx); err != nil {
		return false, err
	}
	if why := m.Unproven(); why != "" {
		m.log.Warn("taking over with a snapshot that cannot be proven to hold every event of the group: an order changed in the gap gets an event whose before is this snapshot's state", "why", why)
	}
	applied, err := m.ApplyCheckpoint(ctx, true)
	if err != nil {
		return false, err
	}
	var cp *lease.Checkpoint
	if applied {
		cp = m.applied.Load()
	}
	if err := m.beforeTenure(ctx, cp); err != nil {
		return false, err
	}
	// The tenure's first checkpoint, before any call: a replica that was
	// active before this one and restarts sees that it does not continue.
	// The tenure is recorded in the same write of the record.
	_, err = m.checkpointWith(ctx, l, m.activate(l.Writer()))
	return true, err
}

func (m *Mirror) beforeTenure(ctx context.Context, cp *lease.Checkpoint) error {
	if m.cfg.BeforeTenure == nil {
		return nil
	}
	return m.cfg.BeforeTenure(ctx, cp)
}

// Continues says whether the state file is provably the group's newest, as
// after the restart of a single replica: the latest checkpoint was written
// by this file's last tenure (the same writer: process nonce and lease
// revision, not the revision alone, which starts at 1 again in a lease
// bucket created again). Without a checkpoint to tell (none written,
// deleted, purged, or a value that does not decode) it continues only
// when the group has nothing newer than the file: no stream event past
// its sequence in the same stream, no dump it has not seen. Otherwise the
// state file must be brought to the group's state first (Demoted, CatchUp,
// ApplyCheckpoint); with no checkpoint, Demoted keeps the file's own
// bookkeeping and moves its watermark back before any change it undoes.
func (m *Mirror) Continues(ctx context.Context) (bool, error) {
	cp, found, err := m.cfg.Checkpoints.Read(ctx)
	if errors.Is(err, lease.ErrCorrupt) {
		m.log.Warn("the group's checkpoint does not decode: treated as absent (the takeover's first checkpoint overwrites it)", "err", err)
		found, err = false, nil
	}
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	rec := m.rec
	m.mu.Unlock()
	if found {
		w := cp.Writer()
		own := rec.Epoch != 0 && w.Epoch == rec.Epoch && w.Nonce == rec.Nonce && (w.File == "" || w.File == rec.File)
		if gen := writtenGen(cp, rec.File); own && gen > rec.Gen {
			m.log.Warn("this state file is an older copy of itself (a backup restored in place, a snapshot rolled back): the group's checkpoint it wrote is newer than the file; it restores the group's checkpoint instead of continuing its tenure",
				"file_id", rec.File, "gen", rec.Gen, "gen_of_the_checkpoint", gen)
			return false, nil
		}
		return own, nil
	}
	return m.nothingNewer(ctx, rec)
}

// writtenGen is the Gen of file in the checkpoint cp (0: none known: an
// earlier version wrote it, or another file).
func writtenGen(cp lease.Checkpoint, file string) uint64 {
	var st struct {
		Records map[string]json.RawMessage `json:"records"`
	}
	var rec Record
	if json.Unmarshal(cp.State, &st) != nil || json.Unmarshal(st.Records[RecordName], &rec) != nil || rec.File != file {
		return 0
	}
	return rec.Gen
}

// nothingNewer says whether the group holds nothing this state file has
// not seen: the stream (same incarnation) ends at its sequence and the
// latest dump, if any, is one it loaded or wrote.
func (m *Mirror) nothingNewer(ctx context.Context, rec Record) (bool, error) {
	if rec.Unproven != "" {
		return false, nil
	}
	s, err := m.streamInfo(ctx)
	if err != nil {
		return false, fmt.Errorf("stream %s: %w", m.cfg.Stream, err)
	}
	info := s.CachedInfo()
	if (!rec.Stream.IsZero() && !rec.Stream.Equal(info.Created)) || info.State.LastSeq > rec.Seq {
		return false, nil
	}
	newer, err := m.newDump(ctx)
	return !newer, err
}

// Demoted undoes the outbox of a replica that is no longer active (or
// starts as a standby) and rewinds the state file to the group's latest
// checkpoint; the mirror goes on from that checkpoint's sequence.
//
// Without a checkpoint (none, deleted, or undecodable) the file keeps its
// own bookkeeping, with its watermark moved back before the earliest
// change it undid: whoever is active next reads those changes again.
func (m *Mirror) Demoted(ctx context.Context) error {
	var earliest time.Time
	n, err := m.cfg.Store.RevertOutbox(func(e state.OutboxEntry) (state.Undo, error) {
		d, err := diff.DecodeEvent(e.Payload)
		if err != nil {
			return state.Undo{}, err
		}
		if t := d.After.UpdatedAt.Time; !t.IsZero() && (earliest.IsZero() || t.Before(earliest)) {
			earliest = t
		}
		return state.Undo{ID: d.OrderID, Before: d.Before, After: d.After}, nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		m.log.Info("standby: unpublished events undone in the snapshot; the active replica reads their period again", "events", n)
	}
	applied, err := m.ApplyCheckpoint(ctx, true)
	if err != nil {
		return err
	}
	if !applied && n > 0 && !earliest.IsZero() {
		if err := m.rewind(earliest.Add(-time.Second)); err != nil {
			return err
		}
	}
	return m.save(func(r *Record) { r.Epoch, r.Nonce = 0, "" })
}

// rewind moves the state file's own watermark back to w (when ahead).
func (m *Mirror) rewind(w time.Time) error {
	own, _, err := m.cfg.Store.Checkpoint()
	if err != nil || !own.Watermark.After(w) {
		return err
	}
	m.log.Warn("no checkpoint of the group to rewind to: the watermark goes back before the undone changes", "from", own.Watermark, "to", w)
	own.Watermark = w
	return m.cfg.Store.RestoreWith(own, state.Restore{Own: func(string) bool { return true }})
}

// ApplyCheckpoint writes the latest checkpoint into the state file when it
// is newer than the one applied last (always when force). With force the
// mirror's position also goes back to the checkpoint's sequence.
//
// A checkpoint that does not decode is treated as absent (logged once per
// revision): it must not stop every takeover; the next active's first
// checkpoint overwrites it. A checkpoint's sequence of another incarnation
// of the stream does not move the mirror's position.
func (m *Mirror) ApplyCheckpoint(ctx context.Context, force bool) (bool, error) {
	cp, found, err := m.cfg.Checkpoints.Read(ctx)
	if err != nil && !errors.Is(err, lease.ErrCorrupt) {
		return false, err
	}
	id := ckptID(m.cfg.Checkpoints.Revision(), cp)
	if seen, _ := m.ckpt.Load().(string); !force && id == seen {
		return false, nil
	}
	var st state.Checkpoint
	if err == nil && found {
		if jerr := json.Unmarshal(cp.State, &st); jerr != nil {
			err = fmt.Errorf("checkpoint of %s: %w: %w", cp.Instance, lease.ErrCorrupt, jerr)
		}
	}
	if errors.Is(err, lease.ErrCorrupt) {
		m.ckpt.Store(id)
		m.log.Warn("the group's checkpoint does not decode: treated as absent (the next active's first checkpoint overwrites it)", "err", err)
		return false, nil
	}
	if err != nil || !found {
		return false, err
	}
	p := state.Restore{Own: m.own}
	if m.cfg.Merge != nil {
		p.Merge = func(name string, v json.RawMessage, file func(string) json.RawMessage) (json.RawMessage, bool) {
			return m.cfg.Merge(cp, name, v, file)
		}
	}
	if err := m.cfg.Store.RestoreWith(st, p); err != nil {
		return false, err
	}
	m.ckpt.Store(id)
	m.applied.Store(&cp)
	if force {
		err := m.save(func(r *Record) {
			if cp.Stream.IsZero() || r.Stream.IsZero() || cp.Stream.Equal(r.Stream) {
				r.Seq = min(r.Seq, cp.Seq)
			}
		})
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// ckptID names a checkpoint read at revision rev.
func ckptID(rev uint64, cp lease.Checkpoint) string {
	return fmt.Sprintf("%d/%s/%d/%d", rev, cp.Nonce, cp.Epoch, cp.Written.UnixNano())
}

// Run keeps the state file warm until ctx ends: new dumps loaded, the
// stream applied, new checkpoints written. It returns nil when ctx ends.
func (m *Mirror) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := m.follow(ctx, false); err != nil && ctx.Err() == nil {
			m.log.Warn("mirroring the stream failed; retrying", "err", err)
			m.lag.Store(-1)
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	return nil
}

// CatchUp applies everything the stream holds now (the takeover).
func (m *Mirror) CatchUp(ctx context.Context) error {
	return m.follow(ctx, true)
}

// follow reads the stream from the record's position; once (CatchUp)
// returns when nothing more is there. It asks for the next event of the
// group's subjects by a direct get every followEvery (readAfter): a few
// events are read so, more by an ordered consumer (drain), which nats.go
// creates anew for each fetch (a consumer created and one deleted on the
// server each time: a standby fetching every 200 ms made about 15
// requests a second).
func (m *Mirror) follow(ctx context.Context, once bool) error {
	stream, err := m.streamInfo(ctx)
	if err != nil {
		return fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
	}
	info := stream.CachedInfo()
	if err := m.sameStream(info); err != nil {
		return err
	}
	if err := m.loadDump(ctx, info); err != nil {
		return err
	}
	lastLook := time.Now()
	for ctx.Err() == nil {
		if !m.readAfter(ctx, stream) {
			if err := m.drain(ctx, stream); err != nil {
				return err
			}
		}
		if once {
			return nil
		}
		t := time.NewTimer(followEvery)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if time.Since(lastLook) > time.Second && ctx.Err() == nil {
			lastLook = time.Now()
			if again, err := m.look(ctx, stream); err != nil || again {
				return err // again: follow again (a new dump, the stream created again)
			}
		}
	}
	return nil
}

// followEvery is how often a following standby asks for new events.
const followEvery = 200 * time.Millisecond

// look is a following standby's check, once a second: the active's new
// checkpoint applied; again says to follow again from the start (a new
// dump to load, or the stream created again: sameStream resets the
// position).
func (m *Mirror) look(ctx context.Context, stream jetstream.Stream) (again bool, err error) {
	if _, err := m.ApplyCheckpoint(ctx, false); err != nil && ctx.Err() == nil {
		m.log.Warn("applying the active's checkpoint failed", "err", err)
	}
	if newer, err := m.newDump(ctx); err == nil && newer {
		return true, nil
	}
	if info, err := stream.Info(ctx); err == nil && m.streamChanged(info) {
		return true, nil
	}
	return false, nil
}

// drain reads the stream from the record's position to its end with an
// ordered consumer.
func (m *Mirror) drain(ctx context.Context, stream jetstream.Stream) error {
	// Bounded resets: an ordered consumer whose connection is gone (NATS
	// down, the connection closed at a stop) otherwise retries forever
	// inside Fetch, which does not watch ctx, and the stop waits for it.
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{m.cfg.SubjectPrefix + ".>"}, MaxResetAttempts: 2}
	if seq := m.Seq(); seq > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := stream.OrderedConsumer(ctx, occ)
	if err != nil {
		return fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
	}
	for ctx.Err() == nil {
		batch, err := cons.FetchNoWait(m.cfg.Batch)
		if err != nil {
			return fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
		}
		n, err := m.apply(batch)
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}

// apply writes a fetched batch; it returns the number of messages read.
func (m *Mirror) apply(batch jetstream.MessageBatch) (int, error) {
	var msgs []streamMsg
	pending := int64(-1)
	n := 0
	for msg := range batch.Messages() {
		n++
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		pending = int64(md.NumPending)
		msgs = append(msgs, streamMsg{seq: md.Sequence.Stream, subject: msg.Subject(), hdr: msg.Headers(), data: msg.Data()})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && n == 0 {
		return 0, fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
	}
	if n == 0 {
		m.lag.Store(0)
		m.caughtAt.Store(time.Now().UnixNano())
		return 0, nil
	}
	return n, m.applyMsgs(msgs, pending)
}

// streamMsg is an event read from the stream (by a consumer or a direct
// get).
type streamMsg struct {
	seq     uint64
	subject string
	hdr     nats.Header
	data    []byte
}

// applyMsgs writes the states of msgs (in stream order) with the last
// sequence read, in one transaction; pending is how many more the stream
// holds (-1: not known).
func (m *Mirror) applyMsgs(msgs []streamMsg, pending int64) error {
	if len(msgs) == 0 {
		return nil
	}
	var states []state.Mirrored
	for _, msg := range msgs {
		if !m.ownHeader(msg.hdr) {
			continue
		}
		d, err := diff.DecodeEvent(msg.data)
		if err != nil {
			m.log.Warn("an event of the stream does not decode; skipped", "seq", msg.seq, "subject", msg.subject, "err", err)
			continue
		}
		if m.cfg.Shop != "" && msg.hdr.Get(shopid.Header) == "" && d.Source != m.cfg.Source {
			continue // another shop's event from before shop ids
		}
		states = append(states, state.Mirrored{ID: d.OrderID, State: d.After})
	}
	last := msgs[len(msgs)-1].seq
	m.mu.Lock()
	rec := m.rec
	m.mu.Unlock()
	rec.Seq = last
	if err := m.cfg.Store.ApplyMirrored(states, state.Record{Name: RecordName, Value: rec}); err != nil {
		return err
	}
	m.mu.Lock()
	m.rec.Seq = last
	m.mu.Unlock()
	m.lag.Store(pending)
	if pending == 0 {
		m.caughtAt.Store(time.Now().UnixNano())
	}
	if m.cfg.OnApplied != nil {
		m.cfg.OnApplied(len(states))
	}
	return nil
}

// ownHeader says whether a message may be this shop's: its
// Orderwatch-Shop header names this shop, or it has none (an event
// published before shop ids: its source decides).
func (m *Mirror) ownHeader(h nats.Header) bool {
	shop := h.Get(shopid.Header)
	return m.cfg.Shop == "" || shop == "" || shop == m.cfg.Shop
}

// streamChanged says whether info shows another incarnation of the stream
// than the one the record's sequence counts in, or events removed before
// this replica read them (a purge under a following standby).
func (m *Mirror) streamChanged(info *jetstream.StreamInfo) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return (!m.rec.Stream.IsZero() && !m.rec.Stream.Equal(info.Created)) || info.State.LastSeq < m.rec.Seq ||
		(m.rec.Unproven == "" && removedUnread(info.State, m.rec))
}

// removedUnread says whether the stream removed events past the record's
// sequence (its limits, a purge: of some events or of all, when it holds
// none and its first sequence is the next one to come) before this
// replica, which had loaded a dump, read them.
func removedUnread(st jetstream.StreamState, rec Record) bool {
	return st.FirstSeq > rec.Seq+1 && rec.Dump != ""
}

// sameStream checks the record's position against the stream: a stream
// deleted and created again (another creation time, or a last sequence
// below the record's) is read again from its start, and the snapshot is
// unproven until a dump of the active covers the new stream; events
// removed from the stream (its limits) before this replica read them
// leave it unproven as well.
func (m *Mirror) sameStream(info *jetstream.StreamInfo) error {
	m.mu.Lock()
	rec := m.rec
	m.mu.Unlock()
	st := info.State
	var why string
	switch {
	case !rec.Stream.IsZero() && !rec.Stream.Equal(info.Created):
		why = fmt.Sprintf("the stream %s was deleted and created again at %s (this replica had read up to sequence %d of the one created at %s)",
			m.cfg.Stream, info.Created.Format(time.RFC3339), rec.Seq, rec.Stream.Format(time.RFC3339))
	case st.LastSeq < rec.Seq:
		why = fmt.Sprintf("the stream %s was created again: its last sequence is %d, this replica had read up to %d", m.cfg.Stream, st.LastSeq, rec.Seq)
	}
	if why != "" {
		m.log.Warn("standby: "+why+"; reading it again from its start; the snapshot is unproven until the active's next dump", "stream", m.cfg.Stream)
		return m.save(func(r *Record) { r.Seq, r.Stream, r.Dump, r.Unproven = 0, info.Created, "", why })
	}
	if rec.Unproven == "" && removedUnread(st, rec) {
		why = fmt.Sprintf("the stream %s removed events %d to %d before this replica read them", m.cfg.Stream, rec.Seq+1, st.FirstSeq-1)
		m.log.Warn("standby: "+why+"; the snapshot is unproven until the active's next dump", "stream", m.cfg.Stream)
		return m.save(func(r *Record) { r.Stream, r.Unproven = info.Created, why })
	}
	if rec.Stream.IsZero() {
		return m.save(func(r *Record) { r.Stream = info.Created })
	}
	return nil
}

// newDump says whether the active wrote a dump this replica has not loaded.
func (m *Mirror) newDump(ctx context.Context) (bool, error) {
	info, err := m.latestDump(ctx)
	return info != nil, err
}

// latestDump is the active's latest dump when this replica has not
// loaded it (nil: none, or loaded).
func (m *Mirror) latestDump(ctx context.Context) (*jetstream.ObjectInfo, error) {
	if m.cfg.Dumps == nil {
		return nil, nil
	}
	info, err := m.dumpInfo(ctx)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if info.NUID == m.rec.Dump {
		return nil, nil
	}
	return info, nil
}

// loadDump loads the active's latest dump when this replica has not. A
// dump of another incarnation of the stream (info) is noted and not
// loaded: its sequence means nothing in this stream, and the snapshot may
// be newer than it.
func (m *Mirror) loadDump(ctx context.Context, sinfo *jetstream.StreamInfo) error {
	latest, err := m.latestDump(ctx)
	if err != nil || latest == nil {
		return err
	}
	res, info, err := m.openDump(ctx, latest)
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	defer res.Close()
	seq, err := strconv.ParseUint(info.Metadata["seq"], 10, 64)
	if err != nil {
		return fmt.Errorf("snapshot dump without a stream sequence: %w", err)
	}
	var in time.Time
	if s := info.Metadata["stream"]; s != "" {
		if in, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("snapshot dump with a bad stream creation time: %w", err)
		}
	}
	m.mu.Lock()
	rec := m.rec
	m.mu.Unlock()
	if (!in.IsZero() && !in.Equal(sinfo.Created)) || (in.IsZero() && rec.Unproven != "") {
		m.log.Info("standby: the active's snapshot is of an earlier stream; not loaded", "seq", seq, "written", info.ModTime)
		return m.save(func(r *Record) { r.Dump = info.NUID })
	}
	rec.Seq, rec.Dump, rec.Stream = seq, info.NUID, sinfo.Created
	if seq+1 >= sinfo.State.FirstSeq {
		rec.Unproven = "" // the dump and the stream from its sequence hold everything
	}
	n, err := m.cfg.Store.LoadOrders(res, state.Record{Name: RecordName, Value: rec})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.rec = rec
	m.mu.Unlock()
	m.log.Info("standby: loaded the active's snapshot", "orders", n, "seq", seq, "written", info.ModTime)
	return nil
}

// LastSeq is the stream's last sequence (read before a checkpoint or a
// dump: every event up to it is reflected in the state read after).
func (m *Mirror) LastSeq(ctx context.Context) (uint64, error) {
	seq, _, err := m.position(ctx)
	return seq, err
}

// position is the stream's last sequence and its creation time (which
// incarnation of the stream the sequence counts in).
func (m *Mirror) position(ctx context.Context) (uint64, time.Time, error) {
	s, err := m.streamInfo(ctx)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("stream %s: %w", m.cfg.Stream, err)
	}
	info := s.CachedInfo()
	return info.State.LastSeq, info.Created, nil
}

// Committed is the active's step after a verified sweep: a checkpoint
// (when the outbox is empty: else the next sweep's) and, after the first
// sweep of a tenure and then every DumpEvery, a snapshot dump; the
// tenure's first dump (once the first sync is done) is written before the
// checkpoint, and without it no checkpoint is; inside the first sync, once
// it committed a watermark, every checkpoint comes after a dump. It
// returns whether a checkpoint was written. Before the first sync reads it
// writes the checkpoint alone: the active calls it as soon as it records
// the baseline (replica.Checkpoint).
func (m *Mirror) Committed(ctx context.Context, l *lease.Lease) (bool, error) {
	m.writing.Lock() // the checkpoint loop and the first sync's baseline
	defer m.writing.Unlock()
	m.mu.Lock()
	first := !m.dumped
	m.mu.Unlock()
	st, _, err := m.cfg.Store.Checkpoint()
	if err != nil {
		return false, err
	}
	// Inside the first sync, once it committed a slice: the orders it
	// read are in no event of the stream, so every checkpoint that hands
	// its watermark on comes after a dump that holds them (else a
	// successor continues from the watermark without them).
	syncing := !st.BaselineDone && !st.Watermark.IsZero()
	if (first || syncing) && m.cfg.Dumps != nil {
		// The tenure's first dump goes before its checkpoint: a checkpoint
		// saying that the first sync is done never becomes the group's
		// newest without a dump of the snapshot that sync recorded (no
		// event of the stream holds it). A takeover from such a checkpoint
		// would restore an empty snapshot and publish every order as
		// discovered (seen in fleet mode: a shop given up right after its
		// first sync, its last dump timing out).
		if err := m.dump(ctx, l); errors.Is(err, state.ErrNotQuiet) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	ok, err := m.checkpoint(ctx, l)
	if !ok || err != nil {
		return ok, err
	}
	m.mu.Lock()
	due := !m.dumped || time.Since(m.lastDump) >= m.cfg.DumpEvery || !m.dumpedIn.Equal(m.stream)
	m.mu.Unlock()
	if m.cfg.Dumps != nil && due {
		if err := m.dump(ctx, l); err != nil && !errors.Is(err, state.ErrNotQuiet) {
			return true, err
		}
	}
	return true, nil
}

// checkpoint writes a checkpoint when the outbox is empty; false when it
// is not.
func (m *Mirror) checkpoint(ctx context.Context, l *lease.Lease) (bool, error) {
	return m.checkpointWith(ctx, l, nil)
}

// checkpointWith is checkpoint with also, a change of the record saved
// in the same write (nil: none).
//
// The record is written once per checkpoint, before it: one more
// checkpoint of this file (the checkpoint carries the count: a copy of the
// file taken before it has a lower one). The stream position the
// checkpoint reached is kept in memory and written with the next write of
// the record (the next checkpoint's, or any other), unless the stream was
// created again: a file whose position lags one checkpoint behind reads a
// few events of its own again when it follows the stream (applying them
// again changes nothing), as after any demotion (ApplyCheckpoint).
func (m *Mirror) checkpointWith(ctx context.Context, l *lease.Lease, also func(*Record)) (bool, error) {
	seq, created, err := m.position(ctx)
	if err != nil {
		return false, err
	}
	err = m.save(func(r *Record) {
		r.Gen++
		if also != nil {
			also(r)
		}
	})
	if err != nil {
		return false, err
	}
	st, quiet, err := m.cfg.Store.Checkpoint()
	if err != nil || !quiet {
		return false, err
	}
	if err := m.cfg.Checkpoints.WriteAt(ctx, l, seq, created, st); err != nil {
		return false, err
	}
	m.ckpt.Store(ckptID(m.cfg.Checkpoints.Revision(), m.cfg.Checkpoints.Last()))
	m.mu.Lock()
	m.stream = created
	again := !m.rec.Stream.Equal(created)
	if !again {
		m.rec.Seq = max(m.rec.Seq, seq)
	}
	m.mu.Unlock()
	if again {
		return true, m.save(func(r *Record) { r.Seq, r.Stream = seq, created }) // the stream was created again
	}
	return true, nil
}

func (m *Mirror) dump(ctx context.Context, l *lease.Lease) error {
	st, _, err := m.cfg.Store.Checkpoint()
	if err != nil || (!st.BaselineDone && st.Watermark.IsZero()) {
		return err // the first sync has read nothing yet: nothing worth a standby's while
	}
	seq, created, err := m.position(ctx)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	n, err := m.cfg.Store.DumpOrders(&buf)
	if err != nil {
		return err
	}
	if err := l.Gate(); err != nil {
		return err
	}
	start := time.Now()
	info, err := m.cfg.Dumps.Put(ctx, jetstream.ObjectMeta{Name: m.cfg.Key, Description: "orderwatch snapshot of the active replica",
		Metadata: map[string]string{"seq": strconv.FormatUint(seq, 10), "stream": created.Format(time.RFC3339Nano), "orders": strconv.Itoa(n), "instance": l.Value().Instance}}, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	m.mu.Lock()
	m.dumped, m.lastDump, m.dumpedIn = true, time.Now(), created
	m.mu.Unlock()
	m.log.Info("snapshot dumped for the standbys", "orders", n, "bytes", info.Size, "seq", seq, "took_ms", time.Since(start).Milliseconds())
	return m.save(func(r *Record) { r.Dump, r.Unproven = info.NUID, "" })
}

// DumpBucket returns the object store of the dumps, creating it when
// missing, and again whenever it is found gone (lease.ObjectStore).
func DumpBucket(ctx context.Context, js jetstream.JetStream, name string, opts ...lease.BucketOption) (jetstream.ObjectStore, error) {
	obs, err := lease.ObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: name, Description: "orderwatch: the active replica's snapshot for its standbys", Storage: jetstream.FileStorage}, opts...)
	if err != nil {
		return nil, fmt.Errorf("dump bucket %s: %w", name, err)
	}
	return obs, nil
}
