package testnats

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster runs n NATS servers in process as one JetStream cluster and
// returns the client URL of the first once the cluster's JetStream answers.
func Cluster(tb testing.TB, n int) string {
	tb.Helper()
	return StartCluster(tb, n).Servers[0].ClientURL()
}

// JSCluster is a JetStream cluster of in-process servers (StartCluster).
type JSCluster struct {
	Servers []*server.Server
}

// URLs are the client URLs of all the servers, comma-separated: what a
// client (WATCHER_NATS_URL) lists to reconnect to the others when one
// goes.
func (c *JSCluster) URLs() string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.ClientURL())
	}
	return strings.Join(out, ",")
}

// MetaLeader is the server leading the cluster's JetStream meta group, or
// nil while none does (among the servers still running).
func (c *JSCluster) MetaLeader() *server.Server {
	for _, s := range c.Servers {
		if s.Running() && s.JetStreamIsLeader() {
			return s
		}
	}
	return nil
}

// ServerNamed is the server of that name (server.Options.ServerName,
// "s0".."s<n-1>", as stream and consumer infos name their leader), or nil.
func (c *JSCluster) ServerNamed(name string) *server.Server {
	for _, s := range c.Servers {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// StartCluster runs n NATS servers in process (random client ports,
// cluster routes on free loopback ports, a temporary store directory
// each, JetStream on) as one cluster named "c"; it returns once a meta
// leader exists and the cluster's JetStream answers an account info
// request. The servers are shut down when the test ends.
func StartCluster(tb testing.TB, n int) *JSCluster {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	c := &JSCluster{}
	for i, p := range ports {
		opts := server.Options{ServerName: fmt.Sprintf("s%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: tb.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: p}, Routes: server.RoutesFromStr(strings.Join(routes, ","))}
		s, err := server.NewServer(&opts)
		if err != nil {
			tb.Fatal(err)
		}
		go s.Start()
		tb.Cleanup(s.Shutdown)
		if !s.ReadyForConnections(10 * time.Second) {
			tb.Fatal("NATS did not start")
		}
		c.Servers = append(c.Servers, s)
	}
	WaitFor(tb, "a JetStream meta leader", 30*time.Second, func() bool { return c.MetaLeader() != nil })
	// Every server online as a JetStream peer of the leader, with its
	// stats: before that, a stream of n replicas finds "no suitable peers
	// for placement".
	WaitFor(tb, "every server a JetStream peer of the meta leader", 30*time.Second, func() bool {
		l := c.MetaLeader()
		return l != nil && len(l.JetStreamClusterPeers()) == n
	})
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		tb.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	WaitFor(tb, "the cluster's JetStream to answer", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return c
}
