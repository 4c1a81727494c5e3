package publisher_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// benchInFlight is the MaxInFlight of both benchmarks (the default).
const benchInFlight = 256

// benchEntries are n status changes of n orders: ~1 KB CloudEvents.
func benchEntries(n int) []state.OutboxEntry {
	return stepEntries(1_000_000, n, 1)
}

func benchStream(tb testing.TB, js jetstream.JetStream) {
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: stream, Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute,
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func reportRate(b *testing.B, n int, d time.Duration, entries []state.OutboxEntry) {
	size := 0
	for _, e := range entries {
		size += len(e.Payload)
	}
	b.ReportMetric(float64(n)/d.Seconds(), "msgs/s")
	b.ReportMetric(float64(size)/float64(max(len(entries), 1)), "B/msg")
}

// BenchmarkDrain: b.N outbox entries in a state file with fsync on, drained
// by Flush into a file-backed stream (PubAck, delete). One event per order.
func BenchmarkDrain(b *testing.B) {
	benchDrain(b, benchEntries(b.N))
}

// BenchmarkDrainPairs: two consecutive events per order (a status and a
// lock change of one sweep): the second waits for the first's PubAck.
func BenchmarkDrainPairs(b *testing.B) {
	es := make([]state.OutboxEntry, 0, b.N)
	for i := 0; len(es) < b.N; i++ {
		es = append(es, entry(int64(1_000_000+i), 1))
		if len(es) < b.N {
			es = append(es, entry(int64(1_000_000+i), 2))
		}
	}
	benchDrain(b, es)
}

func benchDrain(b *testing.B, es []state.OutboxEntry) {
	srv := runServer(b, nil)
	_, js := plainConn(b, srv.url())
	benchStream(b, js)
	st := openStore(b, true)
	commit(b, st, es)
	// Committed by "this process": never sent, no look-ups (without the
	// record they would count as left by an earlier version).
	if err := st.SaveRecord(publisher.PublisherRecord, map[string]uint64{"sent_through": 0}); err != nil {
		b.Fatal(err)
	}
	var deletes atomic.Int64
	p, err := publisher.New(connect(b, srv.url()), st, publisher.Config{Stream: stream, MaxInFlight: benchInFlight,
		OnPublished: func(int, time.Duration) { deletes.Add(1) }})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := p.EnsureStream(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	b.StopTimer()
	reportRate(b, b.N, d, es)
	b.ReportMetric(float64(b.N)/float64(max(deletes.Load(), 1)), "entries/delete")
	if p.Published() != uint64(b.N) {
		b.Fatalf("depth %d, published %d of %d", st.OutboxDepth(), p.Published(), b.N)
	}
}

// BenchmarkRawPublish: the same messages (subject, headers, payload) in a
// plain JetStream async publish loop with the same number of unacknowledged
// publishes, into a file-backed stream: what `nats bench js pub --async`
// measures, and the ceiling of BenchmarkDrain.
func BenchmarkRawPublish(b *testing.B) {
	srv := runServer(b, nil)
	nc, err := nats.Connect(srv.url())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(benchInFlight))
	if err != nil {
		b.Fatal(err)
	}
	benchStream(b, js)
	es := benchEntries(b.N)
	msgs := make([]*nats.Msg, len(es))
	for i, e := range es {
		msgs[i] = &nats.Msg{Subject: e.Subject, Data: e.Payload, Header: nats.Header{
			jetstream.MsgIDHeader: []string{e.ID}, "Content-Type": []string{publisher.ContentType}}}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, m := range msgs {
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("acks missing")
	}
	d := time.Since(start)
	b.StopTimer()
	reportRate(b, b.N, d, es)
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		b.Fatal(err)
	}
	if got := s.CachedInfo().State.Msgs; got != uint64(b.N) {
		b.Fatalf("stream holds %d of %d", got, b.N)
	}
}
