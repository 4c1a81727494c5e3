// Package mirror keeps a standby replica's state file warm without a call
// to the shop: NATS stream -> mirror -> state (snapshot only).
//
//   - Events: every event of the group's subjects carries the order's
//     tracked state after the change (data.after); the mirror reads the
//     stream with an ordered consumer from its last applied sequence and
//     writes those states into the snapshot, in batches, each with the
//     sequence it reached (one transaction). A state older than the stored
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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/state"
)

// RecordName is the mirror's record in the state file: this replica's own
// (never taken from a checkpoint).
const RecordName = "replica"

// Record is this replica's position: its state file's random id, the
// lease tenure it last held, the last stream sequence its snapshot
// reflects and the dump it loaded last.
type Record struct {
	File  string `json:"file"`
	Epoch uint64 `json:"epoch,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	Dump  string `json:"dump,omitempty"`
}

// Store is what the mirror needs of the state file (*state.Store).
type Store interface {
	LoadRecord(name string, v any) (bool, error)
	SaveRecord(name string, v any) error
	ApplyMirrored(states []state.Mirrored, recs ...state.Record) error
	RestoreCheckpoint(c state.Checkpoint, own func(string) bool) error
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
	// Own names the records of the state file that belong to this replica's
	// own file (besides RecordName) and that a checkpoint never replaces,
	// e.g. the publisher's send mark, which counts this file's outbox.
	Own       []string
	DumpEvery time.Duration // [5m]
	Batch     int           // events per transaction [512]
	Logger    *slog.Logger
	// OnApplied is called after every applied batch: events applied.
	OnApplied func(n int)
}

// Mirror is one replica's link to the group's stream, checkpoints and dumps.
type Mirror struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	rec      Record
	lastDump time.Time // the active's last dump in this tenure
	dumped   bool

	lag      atomic.Int64 // events behind the stream; -1 unknown
	caughtAt atomic.Int64 // unix nanos of the last time the mirror had read everything
	ckptRev  atomic.Uint64
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
	if err != nil || !found || m.rec.File == "" {
		// Unreadable or missing: nothing known; a new id for this file.
		var b [8]byte
		_, _ = rand.Read(b[:])
		m.rec = Record{File: hex.EncodeToString(b[:])}
		if err := cfg.Store.SaveRecord(RecordName, m.rec); err != nil {
			return nil, fmt.Errorf("mirror: %w", err)
		}
	}
	return m, nil
}

// File is the state file's random id (lease.Config.File).
func (m *Mirror) File() string { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.File }

// Epoch is the lease tenure this replica held last (0: none known).
func (m *Mirror) Epoch() uint64 { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.Epoch }

// Seq is the last stream sequence the snapshot reflects.
func (m *Mirror) Seq() uint64 { m.mu.Lock(); defer m.mu.Unlock(); return m.rec.Seq }

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
// catch-up).
func (m *Mirror) Activated(epoch uint64) error {
	return m.save(func(r *Record) { r.Epoch = epoch; m.dumped = false })
}

// Takeover brings the state file to the group's newest state before this
// replica, now holding the lease, calls the shop: at the process's start,
// when the latest checkpoint is its own (or none exists) nothing is to do;
// otherwise its own unpublished outbox is undone, the newest dump and the
// stream are applied to the end, and the latest checkpoint written. The
// tenure is recorded last. restored says whether the state file now holds
// the group's state (the components that read it must read it again).
func (m *Mirror) Takeover(ctx context.Context, l *lease.Lease, atStart bool) (restored bool, err error) {
	if atStart {
		cont, err := m.Continues(ctx)
		if err != nil {
			return false, err
		}
		if cont {
			return false, m.Activated(l.Epoch())
		}
		if err := m.Demoted(ctx); err != nil {
			return false, err
		}
	}
	if err := m.CatchUp(ctx); err != nil {
		return false, err
	}
	if _, err := m.ApplyCheckpoint(ctx, true); err != nil {
		return false, err
	}
	if err := m.Activated(l.Epoch()); err != nil {
		return true, err
	}
	// The tenure's first checkpoint, before any call: a replica that was
	// active before this one and restarts sees that it does not continue.
	_, err = m.checkpoint(ctx, l)
	return true, err
}

// Continues says whether the latest checkpoint is this replica's own (or
// there is none): the state file is then the group's newest, as after the
// restart of a single replica. Otherwise another replica was active since
// this one and the state file must be brought to the group's state first
// (Demoted, CatchUp, ApplyCheckpoint).
func (m *Mirror) Continues(ctx context.Context) (bool, error) {
	cp, found, err := m.cfg.Checkpoints.Read(ctx)
	if err != nil {
		return false, err
	}
	return !found || cp.Epoch == m.Epoch(), nil
}

// Demoted undoes the outbox of a replica that is no longer active (or
// starts as a standby) and rewinds the state file to the group's latest
// checkpoint; the mirror goes on from that checkpoint's sequence.
func (m *Mirror) Demoted(ctx context.Context) error {
	n, err := m.cfg.Store.RevertOutbox(func(e state.OutboxEntry) (state.Undo, error) {
		d, err := diff.DecodeEvent(e.Payload)
		if err != nil {
			return state.Undo{}, err
		}
		return state.Undo{ID: d.OrderID, Before: d.Before, After: d.After}, nil
	})
	if err != nil {
		return err
	}
	if n > 0 {
		m.log.Info("standby: unpublished events undone in the snapshot; the active replica reads their period again", "events", n)
	}
	if _, err := m.ApplyCheckpoint(ctx, true); err != nil {
		return err
	}
	return m.save(func(r *Record) { r.Epoch = 0 })
}

// ApplyCheckpoint writes the latest checkpoint into the state file when it
// is newer than the one applied last (always when force). With force the
// mirror's position also goes back to the checkpoint's sequence.
func (m *Mirror) ApplyCheckpoint(ctx context.Context, force bool) (bool, error) {
	cp, found, err := m.cfg.Checkpoints.Read(ctx)
	if err != nil || !found {
		return false, err
	}
	rev := m.cfg.Checkpoints.Revision()
	if !force && rev == m.ckptRev.Load() {
		return false, nil
	}
	var st state.Checkpoint
	if err := json.Unmarshal(cp.State, &st); err != nil {
		return false, fmt.Errorf("checkpoint of %s: %w", cp.Instance, err)
	}
	if err := m.cfg.Store.RestoreCheckpoint(st, m.own); err != nil {
		return false, err
	}
	m.ckptRev.Store(rev)
	if force {
		if err := m.save(func(r *Record) { r.Seq = min(r.Seq, cp.Seq) }); err != nil {
			return false, err
		}
	}
	return true, nil
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
// returns when nothing more is there.
func (m *Mirror) follow(ctx context.Context, once bool) error {
	if err := m.loadDump(ctx); err != nil {
		return err
	}
	stream, err := m.cfg.JS.Stream(ctx, m.cfg.Stream)
	if err != nil {
		return fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
	}
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{m.cfg.SubjectPrefix + ".>"}}
	if seq := m.Seq(); seq > 0 {
		occ.DeliverPolicy, occ.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	cons, err := stream.OrderedConsumer(ctx, occ)
	if err != nil {
		return fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
	}
	lastLook := time.Now()
	for ctx.Err() == nil {
		var batch jetstream.MessageBatch
		if once {
			batch, err = cons.FetchNoWait(m.cfg.Batch)
		} else {
			// Short: Fetch does not watch ctx, and a takeover waits for it.
			batch, err = cons.Fetch(m.cfg.Batch, jetstream.FetchMaxWait(200*time.Millisecond))
		}
		if err != nil {
			return fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
		}
		n, err := m.apply(batch)
		if err != nil {
			return err
		}
		if once && n == 0 {
			return nil
		}
		if !once && time.Since(lastLook) > time.Second {
			lastLook = time.Now()
			if _, err := m.ApplyCheckpoint(ctx, false); err != nil {
				m.log.Warn("applying the active's checkpoint failed", "err", err)
			}
			if newer, err := m.newDump(ctx); err == nil && newer {
				return nil // follow again from the dump's sequence
			}
		}
	}
	return nil
}

// apply writes a fetched batch; it returns the number of messages read.
func (m *Mirror) apply(batch jetstream.MessageBatch) (int, error) {
	var states []state.Mirrored
	var last uint64
	pending := int64(-1)
	n := 0
	for msg := range batch.Messages() {
		n++
		md, err := msg.Metadata()
		if err != nil {
			continue
		}
		last, pending = md.Sequence.Stream, int64(md.NumPending)
		d, err := diff.DecodeEvent(msg.Data())
		if err != nil {
			m.log.Warn("an event of the stream does not decode; skipped", "seq", md.Sequence.Stream, "subject", msg.Subject(), "err", err)
			continue
		}
		states = append(states, state.Mirrored{ID: d.OrderID, State: d.After})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) && n == 0 {
		return 0, fmt.Errorf("mirror stream %s: %w", m.cfg.Stream, err)
	}
	if n == 0 {
		m.lag.Store(0)
		m.caughtAt.Store(time.Now().UnixNano())
		return 0, nil
	}
	m.mu.Lock()
	rec := m.rec
	m.mu.Unlock()
	rec.Seq = last
	if err := m.cfg.Store.ApplyMirrored(states, state.Record{Name: RecordName, Value: rec}); err != nil {
		return n, err
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
	return n, nil
}

// newDump says whether the active wrote a dump this replica has not loaded.
func (m *Mirror) newDump(ctx context.Context) (bool, error) {
	if m.cfg.Dumps == nil {
		return false, nil
	}
	info, err := m.cfg.Dumps.GetInfo(ctx, m.cfg.Key)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return info.NUID != m.rec.Dump, nil
}

// loadDump loads the active's latest dump when this replica has not.
func (m *Mirror) loadDump(ctx context.Context) error {
	if newer, err := m.newDump(ctx); err != nil || !newer {
		return err
	}
	res, err := m.cfg.Dumps.Get(ctx, m.cfg.Key)
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	seq, err := strconv.ParseUint(info.Metadata["seq"], 10, 64)
	if err != nil {
		return fmt.Errorf("snapshot dump without a stream sequence: %w", err)
	}
	m.mu.Lock()
	rec := m.rec
	m.mu.Unlock()
	rec.Seq, rec.Dump = seq, info.NUID
	n, err := m.cfg.Store.LoadOrders(res, state.Record{Name: RecordName, Value: rec})
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.rec.Seq, m.rec.Dump = seq, info.NUID
	m.mu.Unlock()
	m.log.Info("standby: loaded the active's snapshot", "orders", n, "seq", seq, "written", info.ModTime)
	return nil
}

// LastSeq is the stream's last sequence (read before a checkpoint or a
// dump: every event up to it is reflected in the state read after).
func (m *Mirror) LastSeq(ctx context.Context) (uint64, error) {
	s, err := m.cfg.JS.Stream(ctx, m.cfg.Stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", m.cfg.Stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", m.cfg.Stream, err)
	}
	return info.State.LastSeq, nil
}

// Committed is the active's step after a verified sweep: a checkpoint
// (when the outbox is empty: else the next sweep's) and, after the first
// sweep of a tenure and then every DumpEvery, a snapshot dump. It returns
// whether a checkpoint was written.
func (m *Mirror) Committed(ctx context.Context, l *lease.Lease) (bool, error) {
	ok, err := m.checkpoint(ctx, l)
	if !ok || err != nil {
		return ok, err
	}
	m.mu.Lock()
	due := !m.dumped || time.Since(m.lastDump) >= m.cfg.DumpEvery
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
	seq, err := m.LastSeq(ctx)
	if err != nil {
		return false, err
	}
	st, quiet, err := m.cfg.Store.Checkpoint()
	if err != nil || !quiet {
		return false, err
	}
	if err := m.cfg.Checkpoints.Write(ctx, l, seq, st); err != nil {
		return false, err
	}
	m.ckptRev.Store(m.cfg.Checkpoints.Revision())
	return true, m.save(func(r *Record) { r.Seq = max(r.Seq, seq) })
}

func (m *Mirror) dump(ctx context.Context, l *lease.Lease) error {
	st, _, err := m.cfg.Store.Checkpoint()
	if err != nil || !st.BaselineDone {
		return err // no dump during the first sync: nothing worth a standby's while
	}
	seq, err := m.LastSeq(ctx)
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
		Metadata: map[string]string{"seq": strconv.FormatUint(seq, 10), "orders": strconv.Itoa(n), "instance": l.Value().Instance}}, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fmt.Errorf("snapshot dump: %w", err)
	}
	m.mu.Lock()
	m.dumped, m.lastDump = true, time.Now()
	m.mu.Unlock()
	m.log.Info("snapshot dumped for the standbys", "orders", n, "bytes", info.Size, "seq", seq, "took_ms", time.Since(start).Milliseconds())
	return m.save(func(r *Record) { r.Dump = info.NUID })
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
