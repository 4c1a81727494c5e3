// Package faults holds the process-level fault scenarios: each builds the
// real binary (./cmd/watcher), runs it against the simulator (plentysim)
// and an in-process NATS server, injects one kind of fault (kill -9, a
// NATS outage, a hostile service, a full disk, a failover of two replicas,
// ...) and checks the invariants of the delivery guarantee afterwards. A
// plain `go test ./...` runs the quick ones (quickFaults in
// delivery_test.go); -args -faults runs every one, -args -fault-long each
// at full length (docs/reliability.md). The package has no code of its own.
package faults
