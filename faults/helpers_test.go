package faults

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// The helpers of the tests that run the real binary (package e2e).
var (
	watcherBin  = e2e.Watcher
	freePort    = e2e.FreeAddr
	waitFor     = e2e.WaitFor
	get         = e2e.Get
	cleanEnv    = e2e.CleanEnv
	metricValue = e2e.MetricValue
)

func startNATSServer(t *testing.T) *server.Server {
	t.Helper()
	return testnats.Start(t)
}
