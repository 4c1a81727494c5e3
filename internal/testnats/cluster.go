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
	var first *server.Server
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
		if first == nil {
			first = s
		}
	}
	nc, err := nats.Connect(first.ClientURL())
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
	return first.ClientURL()
}
