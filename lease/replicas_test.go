package lease_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// cluster runs n NATS servers in process as one JetStream cluster and
// returns the client URL of the first once the cluster answers.
func cluster(t *testing.T, n int) string {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var first *server.Server
	for i, p := range ports {
		opts := server.Options{ServerName: fmt.Sprintf("s%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: p}, Routes: server.RoutesFromStr(strings.Join(routes, ","))}
		s, err := server.NewServer(&opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		t.Cleanup(s.Shutdown)
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("NATS did not start")
		}
		if first == nil {
			first = s
		}
	}
	js := jsOf(t, first.ClientURL())
	waitFor(t, "the cluster's JetStream to answer", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return first.ClientURL()
}

// The buckets the watcher creates have the replicas asked for (the
// stream's), and an existing bucket with one replica is changed to them.
func TestBucketReplicas(t *testing.T) {
	js := jsOf(t, cluster(t, 3))
	ctx := context.Background()
	replicas := func(stream string) int {
		t.Helper()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.Replicas
	}
	if _, _, err := lease.Bucket(ctx, js, "l", testTTL, lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.CheckpointBucket(ctx, js, "c", lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.ObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: "o"}, lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"KV_l", "KV_c", "OBJ_o"} {
		if got := replicas(s); got != 3 {
			t.Errorf("%s created with %d replicas, want 3", s, got)
		}
	}
	// Created with one replica by an earlier version, then asked for three.
	if _, err := lease.CheckpointBucket(ctx, js, "old"); err != nil {
		t.Fatal(err)
	}
	if got := replicas("KV_old"); got != 1 {
		t.Fatalf("precondition: KV_old has %d replicas, want 1", got)
	}
	if _, err := lease.CheckpointBucket(ctx, js, "old", lease.Replicas(3)); err != nil {
		t.Fatal(err)
	}
	if got := replicas("KV_old"); got != 3 {
		t.Errorf("KV_old has %d replicas after asking for 3, want 3", got)
	}
}
