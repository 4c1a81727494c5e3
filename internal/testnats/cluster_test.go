package testnats

import (
	"context"
	"fmt"
	"os"
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

// TestClusterKVPutRate measures the KV puts per second an in-process
// cluster of three sustains on this machine, for a bucket of 1 and of 3
// replicas, from 1 and from 64 concurrent writers (each put waits for its
// acknowledgement, as a lease renewal or a checkpoint does). It runs with
// NATS_CLUSTER_MEASURE=<seconds per case>.
func TestClusterKVPutRate(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("NATS_CLUSTER_MEASURE"))
	if secs <= 0 {
		t.Skip("NATS_CLUSTER_MEASURE=<seconds per case> measures")
	}
	c := StartCluster(t, 3)
	js := jsOn(t, c.URLs())
	ctx := context.Background()
	for _, replicas := range []int{1, 3} {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("rate_r%d", replicas), History: 1, Replicas: replicas, Storage: jetstream.FileStorage})
		if err != nil {
			t.Fatal(err)
		}
		for _, writers := range []int{1, 64} {
			var puts, errs atomic.Int64
			end := time.Now().Add(time.Duration(secs) * time.Second)
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					val := make([]byte, 200) // about a lease value or a checkpoint
					for i := 0; time.Now().Before(end); i++ {
						pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
						_, err := kv.Put(pctx, fmt.Sprintf("shop%d", (w*1000+i)%10000), val)
						cancel()
						if err != nil {
							errs.Add(1)
							continue
						}
						puts.Add(1)
					}
				})
			}
			wg.Wait()
			t.Logf("R%d, %d writers: %.0f puts/s (%d errors)", replicas, writers, float64(puts.Load())/float64(secs), errs.Load())
		}
	}
}
