package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// takeoverReads are the reads of the group a takeover needs that do not
// depend on one another, made at once when it begins (prefetch): the
// stream's info and the latest dump's, with the group's checkpoint (kept
// by lease.Checkpoints.Memo) and what Config.Prefetch reads. One round
// trip to NATS instead of one after the other: on a loaded machine each
// costs hundreds of milliseconds, and a killed member's shops wait for
// them (a takeover was about ten in a row).
//
// The stream's info is read before the takeover applies the stream, so
// it is also a valid position for the tenure's first checkpoint: every
// event up to its last sequence is in the state read after.
type takeoverReads struct {
	stream   jetstream.Stream // nil: not read (an error): read when needed
	dump     *jetstream.ObjectInfo
	dumpRead bool // dump is the answer (nil: there is no dump)
}

// prefetch makes the takeover's reads at once and keeps their answers
// until done is called; a read that failed is made again when needed.
func (m *Mirror) prefetch(ctx context.Context) (done func()) {
	var r takeoverReads
	var wg sync.WaitGroup
	wg.Go(func() { _, _, _ = m.cfg.Checkpoints.Read(ctx) }) // kept by the memo
	wg.Go(func() {
		if s, err := m.cfg.JS.Stream(ctx, m.cfg.Stream); err == nil {
			r.stream = s
		}
	})
	if m.cfg.Dumps != nil {
		wg.Go(func() {
			info, err := m.cfg.Dumps.GetInfo(ctx, m.cfg.Key)
			switch {
			case errors.Is(err, jetstream.ErrObjectNotFound):
				r.dumpRead = true
			case err == nil:
				r.dump, r.dumpRead = info, true
			}
		})
	}
	if m.cfg.Prefetch != nil {
		wg.Go(func() { m.cfg.Prefetch(ctx) })
	}
	wg.Wait()
	m.pre.Store(&r)
	return func() { m.pre.Store(nil) }
}

// streamInfo is the stream (with its info): the takeover's read, else
// read now.
func (m *Mirror) streamInfo(ctx context.Context) (jetstream.Stream, error) {
	if r := m.pre.Load(); r != nil && r.stream != nil {
		return r.stream, nil
	}
	return m.cfg.JS.Stream(ctx, m.cfg.Stream)
}

// dumpInfo is the latest dump's info (jetstream.ErrObjectNotFound: none):
// the takeover's read, else read now.
func (m *Mirror) dumpInfo(ctx context.Context) (*jetstream.ObjectInfo, error) {
	if r := m.pre.Load(); r != nil && r.dumpRead {
		if r.dump == nil {
			return nil, jetstream.ErrObjectNotFound
		}
		return r.dump, nil
	}
	return m.cfg.Dumps.GetInfo(ctx, m.cfg.Key)
}

// directMax is how many events after its position a takeover reads by
// direct gets; with more, an ordered consumer reads them.
const directMax = 8

// readAfter applies the events of the group's subjects after the
// record's sequence, read one at a time by direct gets (the next message
// on the subjects), directMax at most, and says whether that was all of
// them: a standby that followed the stream finds none (one request
// instead of an ordered consumer's creation and fetches), a takeover
// from a dump a few minutes old a few. Otherwise (more of them, or an
// error) the caller's ordered consumer reads on from where it stopped.
func (m *Mirror) readAfter(ctx context.Context, s jetstream.Stream) bool {
	if info := s.CachedInfo(); info != nil && info.Config.AllowDirect {
		// A direct get may be answered by a replica of the stream that
		// lags behind its leader ("not found" for the newest events): a
		// stream created with allow_direct (not by orderwatch) is read by
		// the consumer, which the leader serves.
		return false
	}
	var msgs []streamMsg
	seq, done := m.Seq(), false
	for len(msgs) < directMax {
		msg, err := s.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(m.cfg.SubjectPrefix+".>"))
		if err != nil {
			done = errors.Is(err, jetstream.ErrMsgNotFound)
			break
		}
		msgs = append(msgs, streamMsg{seq: msg.Sequence, subject: msg.Subject, hdr: msg.Header, data: msg.Data})
		seq = msg.Sequence
	}
	if err := m.applyMsgs(msgs, -1); err != nil {
		return false
	}
	if done {
		m.lag.Store(0)
		m.caughtAt.Store(time.Now().UnixNano())
	}
	return done
}

// openDump opens the dump info names. A dump of one chunk (a shop of up
// to ~4,000 orders) is one direct get of its chunk, checked against the
// dump's digest; a larger one, or one whose direct get fails, is read by
// the object store (which reads the info again and delivers the chunks
// through a consumer it creates: three round trips and more). The
// returned info is the one whose content the reader gives.
func (m *Mirror) openDump(ctx context.Context, info *jetstream.ObjectInfo) (io.ReadCloser, *jetstream.ObjectInfo, error) {
	if info.Chunks == 1 && info.Bucket != "" {
		if b, err := m.chunk(ctx, info); err == nil {
			return io.NopCloser(bytes.NewReader(b)), info, nil
		}
	}
	res, err := m.cfg.Dumps.Get(ctx, m.cfg.Key)
	if err != nil {
		return nil, nil, err
	}
	got, err := res.Info()
	if err != nil {
		res.Close()
		return nil, nil, err
	}
	return res, got, nil
}

// chunk reads the only chunk of the dump info names by a direct get of
// the last message on its subject ($O.<bucket>.C.<nuid>).
func (m *Mirror) chunk(ctx context.Context, info *jetstream.ObjectInfo) ([]byte, error) {
	subj := fmt.Sprintf("$JS.API.DIRECT.GET.OBJ_%s.$O.%s.C.%s", info.Bucket, info.Bucket, info.NUID)
	msg, err := m.cfg.JS.Conn().RequestWithContext(ctx, subj, nil)
	if err != nil {
		return nil, err
	}
	if st := msg.Header.Get("Status"); st != "" {
		return nil, fmt.Errorf("dump chunk: status %s %s", st, msg.Header.Get("Description"))
	}
	sum := sha256.Sum256(msg.Data)
	if want, err := jetstream.DecodeObjectDigest(info.Digest); err != nil || !bytes.Equal(want, sum[:]) || uint64(len(msg.Data)) != info.Size {
		return nil, fmt.Errorf("dump chunk: %d bytes do not match the dump's size %d or digest", len(msg.Data), info.Size)
	}
	return msg.Data, nil
}
