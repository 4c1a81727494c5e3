package mirror

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// dumpsOn is a Mirror with only what openDump needs: a connection to a
// NATS server (in process, or the binary ORDERWATCH_NATS_SERVER names)
// and the dumps' object store.
func dumpsOn(t *testing.T) *Mirror {
	t.Helper()
	s := testnats.StartAny(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	dumps, err := DumpBucket(context.Background(), js, "t_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	return &Mirror{cfg: Config{JS: js, Dumps: dumps, Key: "k"}}
}

func putDump(t *testing.T, m *Mirror, seq string, body []byte) *jetstream.ObjectInfo {
	t.Helper()
	info, err := m.cfg.Dumps.Put(context.Background(), jetstream.ObjectMeta{Name: m.cfg.Key, Metadata: map[string]string{"seq": seq}}, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.cfg.Dumps.GetInfo(context.Background(), m.cfg.Key)
	if err != nil || got.NUID != info.NUID {
		t.Fatalf("GetInfo: %v, %v", got, err)
	}
	return got
}

// opened reads what openDump gives for info: the content and its info.
func opened(t *testing.T, m *Mirror, info *jetstream.ObjectInfo) ([]byte, *jetstream.ObjectInfo) {
	t.Helper()
	r, got, err := m.openDump(context.Background(), info)
	if err != nil {
		t.Fatalf("openDump: %v", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the dump: %v", err)
	}
	return b, got
}

// TestOpenDumpGivesContentWithItsOwnInfo: the takeover reads the dump's
// info at its start and its content later (a direct get of its one
// chunk). Whatever happens in between, the content is given with the
// info of the dump it is (its sequence is where the mirror goes on from):
// a dump replaced since (its chunk purged) is read whole again, the new
// one with its info; a chunk whose digest or size does not match the
// info is not taken; a dump of several chunks is read whole.
func TestOpenDumpGivesContentWithItsOwnInfo(t *testing.T) {
	t.Parallel()
	m := dumpsOn(t)
	small := bytes.Repeat([]byte("a"), 1000)
	first := putDump(t, m, "10", small)
	if first.Chunks != 1 {
		t.Fatalf("precondition: a dump of 1,000 bytes has %d chunks, want 1", first.Chunks)
	}
	if b, err := m.chunk(context.Background(), first); err != nil || !bytes.Equal(b, small) {
		t.Errorf("the direct get of a one-chunk dump: %d bytes, %v; want its %d", len(b), err, len(small))
	}
	if b, info := opened(t, m, first); !bytes.Equal(b, small) || info.NUID != first.NUID {
		t.Errorf("a one-chunk dump: %d bytes of %s; want its %d", len(b), info.NUID, len(small))
	}

	// A digest that does not match (the info of another content).
	wrong := *first
	wrong.Digest = putDigestOf(t, []byte("something else"))
	if _, err := m.chunk(context.Background(), &wrong); err == nil {
		t.Error("the direct get took a chunk whose digest does not match the info")
	}
	if b, info := opened(t, m, &wrong); !bytes.Equal(b, small) || info.Digest != first.Digest {
		t.Errorf("with a digest that does not match: %d bytes with digest %s; want the dump read whole with its own info", len(b), info.Digest)
	}
	// A size that does not match.
	short := *first
	short.Size--
	if _, err := m.chunk(context.Background(), &short); err == nil {
		t.Error("the direct get took a chunk whose size does not match the info")
	}
	if b, info := opened(t, m, &short); !bytes.Equal(b, small) || info.Size != uint64(len(small)) {
		t.Errorf("with a size that does not match: %d bytes, info size %d; want the dump read whole with its own info", len(b), info.Size)
	}

	// Replaced after its info was read: the first dump's chunk is gone.
	other := bytes.Repeat([]byte("b"), 2000)
	second := putDump(t, m, "20", other)
	if _, err := m.chunk(context.Background(), first); err == nil {
		t.Error("the direct get found the chunk of a dump replaced since")
	}
	b, info := opened(t, m, first)
	if !bytes.Equal(b, other) || info.NUID != second.NUID || info.Metadata["seq"] != "20" {
		t.Errorf("a dump replaced after its info was read: %d bytes with info %s (seq %s); want the new one's %d bytes with its info %s (seq 20)",
			len(b), info.NUID, info.Metadata["seq"], len(other), second.NUID)
	}

	// Several chunks (the object store's chunks are 128 KiB).
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	third := putDump(t, m, "30", big)
	if third.Chunks < 2 {
		t.Fatalf("precondition: a dump of 300 KiB has %d chunks", third.Chunks)
	}
	if b, info := opened(t, m, third); !bytes.Equal(b, big) || info.NUID != third.NUID {
		t.Errorf("a dump of %d chunks: %d bytes of %s; want %d of %s", third.Chunks, len(b), info.NUID, len(big), third.NUID)
	}
}

// putDigestOf is the object store's digest of b (as ObjectInfo.Digest
// names it).
func putDigestOf(t *testing.T, b []byte) string {
	t.Helper()
	m := dumpsOn(t)
	return putDump(t, m, "0", b).Digest
}
