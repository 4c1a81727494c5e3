package main

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
)

// TestCheckNamesTheNATSServer: `watcher check` names the NATS server's
// version, and warns once for each thing a server lacks (NATS 2.10: no
// per-key TTL markers).
func TestCheckNamesTheNATSServer(t *testing.T) {
	e := newSessionEnv(t)
	code, out := e.check(t)
	if code != exitOK || !strings.Contains(out, "ok   NATS server "+server.VERSION+" (JetStream API level") || strings.Contains(out, "WARN NATS server") {
		t.Errorf("check against NATS %s: exit %d\n%s", server.VERSION, code, out)
	}
	var b strings.Builder
	pipeline.WriteLacks(&b, lease.ServerFeatures{Version: "2.10.29", APILevel: 0})
	if got := b.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "WARN NATS server 2.10.29 lacks per-key TTL markers") {
		t.Errorf("what a 2.10 server lacks:\n%s", got)
	}
}
