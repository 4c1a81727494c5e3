// Package testnats starts an in-process NATS server with JetStream for the
// tests of several packages.
package testnats

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs a NATS server with JetStream on a random loopback port and a
// temporary store directory; it is shut down when the test ends.
func Start(tb testing.TB) *server.Server {
	tb.Helper()
	return StartWith(tb, nil)
}

// StartWith is Start with options changed by configure (users and their
// permissions, say) before the server starts.
func StartWith(tb testing.TB, configure func(*server.Options)) *server.Server {
	tb.Helper()
	opts := server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: tb.TempDir(), NoSigs: true, NoLog: true}
	if configure != nil {
		configure(&opts)
	}
	ns, err := server.NewServer(&opts)
	if err != nil {
		tb.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("NATS did not start")
	}
	tb.Cleanup(ns.Shutdown)
	return ns
}
