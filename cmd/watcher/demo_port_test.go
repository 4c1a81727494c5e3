package main

import (
	"net"
	"testing"
	"time"
)

// TestDemoHTTPAddr: the demo's watcher listens on loopback, not on 9090,
// the port a Prometheus on the same machine listens on by default (so that
// one can scrape the demo), and falls back to a free port when its own is
// taken.
func TestDemoHTTPAddr(t *testing.T) {
	host, port, err := net.SplitHostPort(demoHTTPAddr)
	if err != nil || host != "127.0.0.1" || port == "9090" || port == "8080" {
		t.Errorf("demoHTTPAddr %q: want loopback, neither Prometheus's 9090 nor the simulator's 8080", demoHTTPAddr)
	}
	if got := demoConfig("http://sim", "nats://x", "state.db", time.Second).HTTPAddr; got != demoHTTPAddr && got != "127.0.0.1:0" {
		t.Errorf("demo HTTPAddr %q, want %s or a random port", got, demoHTTPAddr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := freeAddr(ln.Addr().String()); got != "127.0.0.1:0" {
		t.Errorf("freeAddr(%s) with the port taken = %q, want 127.0.0.1:0", ln.Addr(), got)
	}
}
