package testnats

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func jsOn(t *testing.T, urls string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// A stream of three replicas keeps its messages and takes new ones when
// its leader's server is shut down: the cluster elects another leader and
// a client listing all the servers goes on through the others.
func TestClusterSurvivesItsStreamLeader(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Servers) != 3 || c.MetaLeader() == nil {
		t.Fatalf("%d servers, meta leader %v", len(c.Servers), c.MetaLeader())
	}
	js := jsOn(t, c.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, "t.a", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.ServerNamed(s.CachedInfo().Cluster.Leader)
	if leader == nil {
		t.Fatalf("stream leader %q is none of the servers", s.CachedInfo().Cluster.Leader)
	}
	leader.Shutdown()
	leader.WaitForShutdown()
	var msgs uint64
	WaitFor(t, "the stream under a new leader with its 5 messages and a sixth", 30*time.Second, func() bool {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		defer pcancel()
		if _, err := js.Publish(pctx, "t.a", []byte("after"), jetstream.WithMsgID("after")); err != nil {
			return false
		}
		info, err := s.Info(pctx)
		if err != nil || info.Cluster.Leader == "" || info.Cluster.Leader == leader.Name() {
			return false
		}
		msgs = info.State.Msgs
		return true
	})
	if msgs != 6 {
		t.Errorf("the stream holds %d messages after the leader's loss; want 6", msgs)
	}
}

// rateOf runs op from `writers` goroutines for d and returns the
// operations per second that succeeded and the errors.
func rateOf(d time.Duration, writers int, op func(w, i int) error) (float64, int64) {
	var ok, errs atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				if op(w, i) != nil {
					errs.Add(1)
					continue
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds(), errs.Load()
}

// TestClusterKVPutRate measures what an in-process cluster of three
// sustains on this machine: KV puts per second for a bucket of 1 and of 3
// replicas, and stream info requests per second on a stream of 3 (what
// every checkpoint asks first: mirror.LastSeq), from 1 and from 64
// concurrent clients, each waiting for its reply as a lease renewal or a
// checkpoint does. It runs with NATS_CLUSTER_MEASURE=<seconds per case>.
func TestClusterKVPutRate(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("NATS_CLUSTER_MEASURE"))
	if secs <= 0 {
		t.Skip("NATS_CLUSTER_MEASURE=<seconds per case> measures")
	}
	d := time.Duration(secs) * time.Second
	c := StartCluster(t, 3)
	js := jsOn(t, c.URLs())
	ctx := context.Background()
	val := make([]byte, 200) // about a lease value or a checkpoint
	for _, replicas := range []int{1, 3} {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("rate_r%d", replicas), History: 1, Replicas: replicas, Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		for _, writers := range []int{1, 64} {
			rate, errs := rateOf(d, writers, func(w, i int) error {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, err := kv.Put(pctx, fmt.Sprintf("shop%d", (w*1000+i)%10000), val)
				return err
			})
			t.Logf("KV put, R%d, %d clients: %.0f/s (%d errors)", replicas, writers, rate, errs)
		}
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	for _, writers := range []int{1, 64} {
		rate, errs := rateOf(d, writers, func(int, int) error {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := js.Stream(pctx, "ORDERS")
			return err
		})
		t.Logf("stream info, R3, %d clients: %.0f/s (%d errors)", writers, rate, errs)
	}
}

// TestStreamSubjectIndexMemory measures the heap a file stream's
// per-subject index takes in the server (in process): N messages (200,000)
// on as many subjects, each ending in an order id as the events' do. It
// runs with NATS_CLUSTER_MEASURE set.
func TestStreamSubjectIndexMemory(t *testing.T) {
	if os.Getenv("NATS_CLUSTER_MEASURE") == "" {
		t.Skip("NATS_CLUSTER_MEASURE=<seconds> measures")
	}
	const n = 200_000
	s := Start(t)
	js := jsOn(t, s.ClientURL())
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	before := heap()
	payload := make([]byte, 1024)
	for i := range n {
		subject := fmt.Sprintf("orders.shop-%04d.status_changed.5.6.%d", i%10000, 1_000_000+i)
		if _, err := js.PublishAsync(subject, payload); err != nil {
			t.Fatal(err)
		}
		if i%10_000 == 9_999 {
			<-js.PublishAsyncComplete()
		}
	}
	<-js.PublishAsyncComplete()
	info, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	st := info.CachedInfo().State
	if st.Msgs != n || st.NumSubjects != n {
		t.Fatalf("%d messages on %d subjects; want %d on as many", st.Msgs, st.NumSubjects, n)
	}
	after := heap()
	t.Logf("%d messages of 1 KiB on %d subjects: server heap +%d MiB (%.0f bytes per subject), %d MiB stored",
		n, st.NumSubjects, (after-before)>>20, float64(after-before)/n, st.Bytes>>20)
}
