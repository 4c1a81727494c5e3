package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

func tempPath(t testing.TB) string { return filepath.Join(t.TempDir(), "state.db") }

func events(n int, tag string) []OutboxEntry {
	out := make([]OutboxEntry, n)
	for i := range out {
		out[i] = OutboxEntry{
			Seq:     999, // ignored: the store assigns
			ID:      fmt.Sprintf("%s-%d", tag, i),
			Subject: fmt.Sprintf("orders.created.%d", i),
			Payload: []byte(fmt.Sprintf(`{"n":%d,"tag":%q}`, i, tag)),
		}
	}
	return out
}

func puts(from, to int64) []Put {
	var out []Put
	for id := from; id <= to; id++ {
		out = append(out, Put{ID: id, State: typical(id)})
	}
	return out
}

func TestOpenNewFile(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	if s.Path() != path {
		t.Errorf("Path = %q", s.Path())
	}
	m, err := s.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if m != (Meta{SchemaVersion: SchemaVersion}) {
		t.Errorf("Meta of a new file = %+v", m)
	}
	if s.OutboxDepth() != 0 {
		t.Errorf("OutboxDepth = %d", s.OutboxDepth())
	}
	if got := lookup(t, s, 1, 2); got[0] != nil || got[1] != nil {
		t.Errorf("Lookup on a new file = %v", got)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 (the file holds the session token)", fi.Mode().Perm())
	}
	// An existing empty file (e.g. created by an init container) is initialised too.
	empty := tempPath(t)
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, empty, Options{})
	if m, err := s2.Meta(); err != nil || m.SchemaVersion != SchemaVersion {
		t.Errorf("empty file: Meta = %+v, %v", m, err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := tempPath(t)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wm := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("", 3600))
	base := wm.Add(-time.Hour)
	swept := time.Date(2026, 11, 22, 9, 0, 30, 123, time.UTC)
	if err := s.SetBaseline(base); err != nil {
		t.Fatal(err)
	}
	fixtures := fixtureStates(t)
	var ps []Put
	for i, st := range fixtures {
		ps = append(ps, Put{ID: int64(100 + i), State: st})
	}
	if err := s.Commit(Commit{States: ps, Events: events(3, "a"), Watermark: &wm, BaselineDone: true, LastSweep: &swept}); err != nil {
		t.Fatal(err)
	}
	tok := order.Token{AccessToken: "acc", RefreshToken: "ref", TokenType: "Bearer", ExpiresAt: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
	if err := s.SaveToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openT(t, path, Options{})
	m, err := s.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if !m.Watermark.Equal(wm) || !m.Baseline.Equal(base) || !m.BaselineDone || !m.LastSweep.Equal(swept) || m.SchemaVersion != SchemaVersion {
		t.Errorf("Meta after reopen = %+v", m)
	}
	if _, off := m.Watermark.Zone(); off != 3600 {
		t.Errorf("watermark offset %d, want 3600", off)
	}
	ids := make([]int64, len(fixtures))
	for i := range ids {
		ids[i] = int64(100 + i)
	}
	for i, got := range lookup(t, s, ids...) {
		if got == nil || !got.Same(fixtures[i]) {
			t.Errorf("order %d after reopen = %+v, want %+v", ids[i], got, fixtures[i])
		}
	}
	if s.OutboxDepth() != 3 {
		t.Errorf("OutboxDepth after reopen = %d, want 3", s.OutboxDepth())
	}
	ob, err := s.Outbox(0, 0)
	if err != nil || len(ob) != 3 || ob[0].ID != "a-0" || string(ob[2].Payload) != `{"n":2,"tag":"a"}` {
		t.Errorf("Outbox after reopen = %+v, %v", ob, err)
	}
	got, err := s.LoadToken(context.Background())
	if err != nil || got.AccessToken != tok.AccessToken || got.RefreshToken != tok.RefreshToken || got.TokenType != tok.TokenType || !got.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Errorf("token after reopen = %+v, %v", got, err)
	}
}

func TestSetBaselineOnlyOnce(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	first := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if err := s.SetBaseline(time.Time{}); err == nil {
		t.Error("zero baseline accepted")
	}
	for _, b := range []time.Time{first, first.Add(time.Hour), first.Add(-time.Hour)} {
		if err := s.SetBaseline(b); err != nil {
			t.Fatal(err)
		}
	}
	if m, _ := s.Meta(); !m.Baseline.Equal(first) {
		t.Errorf("baseline = %v, want the first one %v", m.Baseline, first)
	}
}

func TestCommitOutboxFullWritesNothing(t *testing.T) {
	s := openT(t, tempPath(t), Options{OutboxMax: 5})
	wm1 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.Commit(Commit{States: puts(1, 10), Events: events(3, "a"), Watermark: &wm1}); err != nil {
		t.Fatal(err)
	}
	wm2 := wm1.Add(time.Minute)
	err := s.Commit(Commit{States: puts(11, 20), Events: events(3, "b"), Watermark: &wm2, BaselineDone: true, LastSweep: &wm2})
	if !errors.Is(err, ErrOutboxFull) || !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("Commit over the limit: err = %v, want ErrOutboxFull naming the file", err)
	}
	if got := lookup(t, s, 11, 20); got[0] != nil || got[1] != nil {
		t.Errorf("states of the refused commit were written: %v", got)
	}
	if m, _ := s.Meta(); !m.Watermark.Equal(wm1) || m.BaselineDone || !m.LastSweep.IsZero() {
		t.Errorf("meta of the refused commit was written: %+v", m)
	}
	if ob, _ := s.Outbox(0, 0); len(ob) != 3 || s.OutboxDepth() != 3 {
		t.Errorf("outbox = %d entries, depth %d, want 3", len(ob), s.OutboxDepth())
	}
	// Exactly up to the limit fits; a page without events always fits.
	if err := s.Commit(Commit{States: puts(11, 12), Events: events(2, "c")}); err != nil {
		t.Fatalf("commit up to the limit: %v", err)
	}
	if err := s.Commit(Commit{States: puts(13, 14)}); err != nil {
		t.Fatalf("commit without events at the limit: %v", err)
	}
	if err := s.Commit(Commit{Events: events(1, "d")}); !errors.Is(err, ErrOutboxFull) {
		t.Fatalf("one over the limit: %v", err)
	}
	if err := s.DeleteOutbox(1); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(Commit{Events: events(1, "d")}); err != nil {
		t.Fatalf("after a delete: %v", err)
	}
}

func TestCommitIsAtomicOnError(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	wm := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.Commit(Commit{States: puts(1, 2), Events: events(1, "a"), Watermark: &wm}); err != nil {
		t.Fatal(err)
	}
	// The last step of the transaction fails (a time bbolt's meta encoding
	// cannot hold): the states, events and watermark before it must not remain.
	bad := time.Now().In(time.FixedZone("", 40000*60))
	wm2 := wm.Add(time.Hour)
	err := s.Commit(Commit{States: puts(3, 300), Events: events(4, "b"), Watermark: &wm2, BaselineDone: true, LastSweep: &bad})
	if err == nil {
		t.Fatal("commit with an unencodable time succeeded")
	}
	if got := lookup(t, s, 3, 300); got[0] != nil || got[1] != nil {
		t.Error("states of the failed commit remain")
	}
	if ob, _ := s.Outbox(0, 0); len(ob) != 1 || s.OutboxDepth() != 1 {
		t.Errorf("outbox after the failed commit: %d entries, depth %d", len(ob), s.OutboxDepth())
	}
	if m, _ := s.Meta(); !m.Watermark.Equal(wm) || m.BaselineDone {
		t.Errorf("meta after the failed commit: %+v", m)
	}
	if errors.Is(err, ErrNotWritable) || s.WriteErr() != nil {
		t.Errorf("a failure of the transaction's content is not a storage failure: %v, WriteErr %v", err, s.WriteErr())
	}
}

func TestWatermarkNeverMovesBack(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("", 3600))
	for _, tc := range []struct {
		set  time.Time
		want time.Time
	}{
		{t0, t0},
		{t0.Add(-time.Second), t0}, // back: ignored
		{t0.UTC(), t0},             // same instant: unchanged
		{time.Time{}, t0},          // zero: ignored
		{t0.Add(time.Second), t0.Add(time.Second)},
	} {
		set := tc.set
		if err := s.Commit(Commit{Watermark: &set}); err != nil {
			t.Fatal(err)
		}
		if m, _ := s.Meta(); !m.Watermark.Equal(tc.want) {
			t.Errorf("after setting %v: watermark %v, want %v", tc.set, m.Watermark, tc.want)
		}
	}
}

func TestOutboxOrderAndDelete(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	var want []string
	for batch := 0; batch < 4; batch++ {
		evs := events(5, fmt.Sprint("b", batch))
		for _, e := range evs {
			want = append(want, e.ID)
		}
		if err := s.Commit(Commit{States: puts(int64(batch*10), int64(batch*10+3)), Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Outbox(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(want) {
		t.Fatalf("outbox has %d entries, want %d", len(all), len(want))
	}
	for i, e := range all {
		if e.ID != want[i] || (i > 0 && e.Seq <= all[i-1].Seq) {
			t.Fatalf("entry %d = %s seq %d: not in commit order", i, e.ID, e.Seq)
		}
	}
	// Paging.
	var paged []OutboxEntry
	for after := uint64(0); ; {
		page, err := s.Outbox(after, 6)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 6 {
			t.Fatalf("page of %d entries, max 6", len(page))
		}
		paged = append(paged, page...)
		after = page[len(page)-1].Seq
	}
	if len(paged) != len(all) {
		t.Errorf("paging read %d entries, want %d", len(paged), len(all))
	}
	// The entries are copies: changing them does not touch the store.
	all[0].Payload[0] = 'X'
	if again, _ := s.Outbox(0, 1); again[0].Payload[0] != '{' {
		t.Error("Outbox returned bytes shared with the store")
	}
	// Delete some, including unknown and repeated sequences.
	if err := s.DeleteOutbox(all[0].Seq, all[1].Seq, all[7].Seq, all[7].Seq, 10_000); err != nil {
		t.Fatal(err)
	}
	if got := s.OutboxDepth(); got != len(all)-3 {
		t.Errorf("depth after deleting 3 = %d, want %d", got, len(all)-3)
	}
	rest, _ := s.Outbox(0, 0)
	if len(rest) != len(all)-3 || rest[0].Seq != all[2].Seq {
		t.Errorf("after delete: %d entries starting at %d", len(rest), rest[0].Seq)
	}
	if err := s.DeleteOutbox(); err != nil {
		t.Fatal(err)
	}
	if page, err := s.Outbox(^uint64(0), 0); err != nil || len(page) != 0 {
		t.Errorf("Outbox(max uint64) = %v, %v", page, err)
	}
	// Depth is counted again on open; sequences continue after reopen.
	lastSeq := all[len(all)-1].Seq
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{})
	if got := s.OutboxDepth(); got != len(all)-3 {
		t.Errorf("depth after reopen = %d, want %d", got, len(all)-3)
	}
	if err := s.Commit(Commit{Events: events(1, "z")}); err != nil {
		t.Fatal(err)
	}
	if page, _ := s.Outbox(lastSeq, 0); len(page) != 1 || page[0].Seq <= lastSeq || page[0].ID != "z-0" {
		t.Errorf("entry after reopen = %+v", page)
	}
	// Deleting everything empties it.
	var seqs []uint64
	left, _ := s.Outbox(0, 0)
	for _, e := range left {
		seqs = append(seqs, e.Seq)
	}
	if err := s.DeleteOutbox(seqs...); err != nil {
		t.Fatal(err)
	}
	if s.OutboxDepth() != 0 {
		t.Errorf("depth = %d after deleting all", s.OutboxDepth())
	}
}

func TestConcurrentCommitAndDrain(t *testing.T) {
	s := openT(t, tempPath(t), Options{NoSync: true, OutboxMax: 50})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	committed := make(chan int, 1)
	wg.Add(1)
	go func() { // the poller
		defer wg.Done()
		n := 0
		for i := int64(0); i < 200; i++ {
			for {
				err := s.Commit(Commit{States: puts(i*10, i*10+9), Events: events(3, fmt.Sprint(i))})
				if err == nil {
					n += 3
					break
				}
				if !errors.Is(err, ErrOutboxFull) {
					t.Error(err)
					committed <- n
					return
				}
				// Full: wait for the publisher, as the sweep pauses.
				select {
				case <-ctx.Done():
					committed <- n
					return
				default:
				}
				runtime.Gosched()
			}
		}
		committed <- n
	}()
	deleted := 0
	wg.Add(1)
	go func() { // the publisher
		defer wg.Done()
		var after uint64
		for ctx.Err() == nil {
			page, err := s.Outbox(after, 7)
			if err != nil {
				t.Error(err)
				return
			}
			if len(page) == 0 {
				runtime.Gosched()
				continue
			}
			seqs := make([]uint64, len(page))
			for i, e := range page {
				seqs[i] = e.Seq
			}
			if err := s.DeleteOutbox(seqs...); err != nil {
				t.Error(err)
				return
			}
			deleted += len(page)
			after = seqs[len(seqs)-1]
			if d := s.OutboxDepth(); d < 0 || d > 50 {
				t.Errorf("depth %d outside 0..50", d)
			}
		}
	}()
	n := <-committed
	// Let the publisher drain what is left, then stop it.
	for s.OutboxDepth() > 0 {
		runtime.Gosched()
	}
	cancel()
	wg.Wait()
	if n != 600 || deleted != n || s.OutboxDepth() != 0 {
		t.Errorf("committed %d, deleted %d, depth %d", n, deleted, s.OutboxDepth())
	}
}

func TestToken(t *testing.T) {
	ctx := context.Background()
	s := openT(t, tempPath(t), Options{})
	if tok, err := s.LoadToken(ctx); err != nil || tok != (order.Token{}) {
		t.Errorf("LoadToken on a new file = %+v, %v", tok, err)
	}
	tok := order.Token{AccessToken: "a\"b", TokenType: "Bearer", ExpiresAt: time.Date(2026, 11, 23, 10, 0, 0, 5, time.FixedZone("", 7200))}
	if err := s.SaveToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadToken(ctx)
	if err != nil || got.AccessToken != tok.AccessToken || got.RefreshToken != "" || got.TokenType != "Bearer" || !got.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Errorf("LoadToken = %+v, %v", got, err)
	}
	if err := s.SaveToken(ctx, order.Token{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadToken(ctx); err != nil || got != (order.Token{}) {
		t.Errorf("after clearing: %+v, %v", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.LoadToken(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("LoadToken with a cancelled context: %v", err)
	}
}

func TestLocked(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	for _, ro := range []bool{false, true} {
		_, err := Open(path, Options{Timeout: 100 * time.Millisecond, ReadOnly: ro})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("second Open (read-only %v): err = %v, want ErrLocked", ro, err)
		}
		want := "state file " + path + " is locked by another process (another watcher running?)"
		if err.Error() != want {
			t.Errorf("error %q, want %q", err, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Released on Close; read-only opens share the lock.
	r1 := openT(t, path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	r2 := openT(t, path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if _, err := Open(path, Options{Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Errorf("read-write Open while readers hold the file: %v", err)
	}
	_, _ = r1.Meta()
	_, _ = r2.Meta()
}

// untouched asserts that a failed Open left the file as it was.
func untouched(t *testing.T, path string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the file was changed (%d -> %d bytes)", len(before), len(after))
	}
}

func TestCorruptFile(t *testing.T) {
	// A valid file, to damage.
	valid := tempPath(t)
	s, err := Open(valid, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(Commit{States: puts(1, 1000)}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	good, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte("not a bbolt database. "), 2000)
	for name, content := range map[string][]byte{
		"text":            []byte("hello\n"),
		"garbage":         garbage,
		"zeroed meta":     append(make([]byte, 8192), good[8192:]...),
		"cut to one page": good[:4096],
		"json":            []byte(`{"watermark":"2026-11-22T10:00:00Z"}`),
		"garbage pages":   append(append([]byte(nil), good[:8192]...), bytes.Repeat([]byte{0xff}, len(good)-8192)...),
	} {
		t.Run(name, func(t *testing.T) {
			path := tempPath(t)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, ro := range []bool{false, true} {
				_, err := Open(path, Options{ReadOnly: ro})
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("read-only %v: err = %v, want ErrCorrupt", ro, err)
				}
				t.Logf("read-only %v: %v", ro, err)
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it aside") {
					t.Errorf("error %q does not name the file or give a hint", err)
				}
			}
			untouched(t, path, content)
		})
	}
}

// writeBolt creates a bbolt file with the given buckets and keys.
func writeBolt(t *testing.T, path string, fill func(tx *bolt.Tx) error) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fill); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestForeignFile(t *testing.T) {
	for name, fill := range map[string]func(tx *bolt.Tx) error{
		"other buckets": func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("widgets"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		},
		"meta without magic": func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put([]byte("version"), []byte("3"))
		},
		"other magic": func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keyMagic, []byte("someone.else"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := tempPath(t)
			before := writeBolt(t, path, fill)
			for _, ro := range []bool{false, true} {
				_, err := Open(path, Options{ReadOnly: ro})
				if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), path) {
					t.Errorf("read-only %v: err = %v, want ErrForeign naming the file", ro, err)
				}
			}
			untouched(t, path, before)
		})
	}
	// A bbolt file without any bucket is as good as new.
	path := tempPath(t)
	writeBolt(t, path, func(*bolt.Tx) error { return nil })
	s := openT(t, path, Options{})
	if m, err := s.Meta(); err != nil || m.SchemaVersion != SchemaVersion {
		t.Errorf("empty bbolt file: %+v, %v", m, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := tempPath(t)
	before := writeBolt(t, path, func(tx *bolt.Tx) error {
		if err := initialise(tx); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, SchemaVersion+1))
	})
	for _, ro := range []bool{false, true} {
		_, err := Open(path, Options{ReadOnly: ro})
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("schema version %d", SchemaVersion+1)) {
			t.Errorf("read-only %v: err = %v, want ErrSchema naming the file and version", ro, err)
		}
	}
	untouched(t, path, before)
}

func TestMigrationFromV0(t *testing.T) {
	path := tempPath(t)
	old := typical(7)
	// A version-0 file: the magic and the snapshot, no schema key, no outbox.
	before := writeBolt(t, path, func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyMagic, []byte(magic)); err != nil {
			return err
		}
		orders, err := tx.CreateBucket(bucketOrders)
		if err != nil {
			return err
		}
		return orders.Put(binary.BigEndian.AppendUint64(nil, 7), appendState(nil, &old))
	})
	// Read-only access never migrates.
	if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "start the watcher once") {
		t.Errorf("read-only open of a v0 file: %v", err)
	}
	untouched(t, path, before)

	s := openT(t, path, Options{})
	m, err := s.Meta()
	if err != nil || m.SchemaVersion != SchemaVersion {
		t.Fatalf("after migration: %+v, %v", m, err)
	}
	if got := lookup(t, s, 7); got[0] == nil || !got[0].Same(old) {
		t.Errorf("order 7 after migration = %+v", got[0])
	}
	if err := s.Commit(Commit{Events: events(2, "m")}); err != nil {
		t.Fatalf("outbox after migration: %v", err)
	}
	if s.OutboxDepth() != 2 {
		t.Errorf("depth %d", s.OutboxDepth())
	}
}

func TestMigrationFailureRollsBack(t *testing.T) {
	path := tempPath(t)
	before := writeBolt(t, path, func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put(keyMagic, []byte(magic))
	})
	orig := migrations[0]
	migrations[0] = func(tx *bolt.Tx) error {
		if err := orig(tx); err != nil {
			return err
		}
		return errors.New("boom")
	}
	defer func() { migrations[0] = orig }()
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "migrate schema version 0 to 1: boom") {
		t.Fatalf("err = %v", err)
	}
	migrations[0] = orig
	// The failed migration left nothing behind: the file is still version 0.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketOutbox) != nil || tx.Bucket(bucketMeta).Get(keySchema) != nil {
			t.Error("a failed migration was partly committed")
		}
		return nil
	})
	_ = db.Close()
	_ = before
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := Open(missing, Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open of a missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Error("read-only open created the file")
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "never initialised") {
		t.Errorf("read-only open of an empty file: %v", err)
	}
	untouched(t, empty, nil)
	bare := filepath.Join(dir, "bare.db")
	before := writeBolt(t, bare, func(*bolt.Tx) error { return nil })
	if _, err := Open(bare, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "never initialised") {
		t.Errorf("read-only open of a bucketless bbolt file: %v", err)
	}
	untouched(t, bare, before)

	path := filepath.Join(dir, "state.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(Commit{States: puts(1, 3), Events: events(2, "r")}); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	r := openT(t, path, Options{ReadOnly: true})
	if got := lookup(t, r, 1, 4); got[0] == nil || got[1] != nil {
		t.Errorf("read-only Lookup = %v", got)
	}
	if r.OutboxDepth() != 2 {
		t.Errorf("read-only depth %d", r.OutboxDepth())
	}
	if err := r.Commit(Commit{States: puts(5, 5)}); err == nil {
		t.Error("Commit on a read-only store succeeded")
	}
	if err := r.SaveToken(context.Background(), order.Token{AccessToken: "x"}); err == nil {
		t.Error("SaveToken on a read-only store succeeded")
	}
}

func TestLookup(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	if err := s.Commit(Commit{States: puts(1, 10)}); err != nil {
		t.Fatal(err)
	}
	got := lookup(t, s, 3, 42, 10, -1, 3)
	if got[0] == nil || !got[0].Same(typical(3)) || got[1] != nil || got[2] == nil || !got[2].Same(typical(10)) || got[3] != nil {
		t.Fatalf("Lookup = %v", got)
	}
	// Fresh values: not shared between slots or calls.
	if got[0] == got[4] {
		t.Error("two slots share one state")
	}
	got[0].LockStatus = "changed"
	if again := lookup(t, s, 3); again[0].LockStatus == "changed" {
		t.Error("a state is shared between lookups")
	}
	// A stale slot is cleared.
	out := []*diff.State{new(diff.State)}
	if err := s.Lookup([]int64{99}, out); err != nil || out[0] != nil {
		t.Errorf("unknown id: %v, %v", out[0], err)
	}
	if err := s.Lookup([]int64{1, 2}, make([]*diff.State, 1)); err == nil {
		t.Error("mismatched lengths accepted")
	}
	// Updating a state replaces it.
	upd := typical(3)
	upd.StatusID = order.MustDecimal("8.3")
	if err := s.Commit(Commit{States: []Put{{ID: 3, State: upd}}}); err != nil {
		t.Fatal(err)
	}
	if got := lookup(t, s, 3); !got[0].Same(upd) {
		t.Errorf("after update: %+v", got[0])
	}
}

func TestCorruptValue(t *testing.T) {
	path := tempPath(t)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(Commit{States: puts(1, 2)}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	writeBolt(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOrders).Put(binary.BigEndian.AppendUint64(nil, 2), []byte{1, 0, 9})
	})
	s = openT(t, path, Options{})
	out := make([]*diff.State, 2)
	err = s.Lookup([]int64{1, 2}, out)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "order 2") || !strings.Contains(err.Error(), path) {
		t.Errorf("Lookup of a damaged value: %v", err)
	}
	if out[0] != nil || out[1] != nil {
		t.Error("results left behind after an error")
	}
}

func TestStats(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	wm := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.SetBaseline(wm.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(Commit{States: puts(1, 1234), Events: events(5, "s"), Watermark: &wm, LastSweep: &wm}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(Commit{States: puts(1000, 1300)}); err != nil { // 66 new, the rest updates
		t.Fatal(err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(s.Path())
	if st.Orders != 1300 || st.OutboxDepth != 5 || !st.Watermark.Equal(wm) || !st.Baseline.Equal(wm.Add(-time.Hour)) ||
		!st.LastSweep.Equal(wm) || st.FileSize != fi.Size() || st.SchemaVersion != SchemaVersion || st.BaselineDone {
		t.Errorf("Stats = %+v", st)
	}
	if err := s.Commit(Commit{BaselineDone: true}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Stats(); err != nil || !st.BaselineDone {
		t.Errorf("after the baseline: Stats = %+v, %v; want BaselineDone", st, err)
	}
}

// TestFileSizeSmall checks the bytes per order on a small scale in every
// run; BenchmarkStateFileSize measures the million.
func TestFileSizeSmall(t *testing.T) {
	n := int64(100_000)
	if testing.Short() {
		n = 20_000
	}
	s := openT(t, tempPath(t), Options{NoSync: true})
	perOrder := fill(t, s, n)
	t.Logf("%d orders: %.1f bytes/order", n, perOrder)
	if perOrder >= 100 {
		t.Errorf("%.1f bytes per order, want < 100", perOrder)
	}
}

// fill inserts orders 1..n in commits of 250 and returns the file's bytes
// per order.
func fill(t testing.TB, s *Store, n int64) float64 {
	t.Helper()
	ps := make([]Put, 0, 250)
	for id := int64(1); id <= n; id++ {
		ps = append(ps, Put{ID: id, State: typical(id)})
		if len(ps) == cap(ps) || id == n {
			if err := s.Commit(Commit{States: ps}); err != nil {
				t.Fatal(err)
			}
			ps = ps[:0]
		}
	}
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	return float64(fi.Size()) / float64(n)
}
