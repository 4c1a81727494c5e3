# Developer targets. CI runs .ci/run, which runs the README's test command.
GO ?= go
FUZZTIME ?= 60s

.PHONY: all test vet fmt bench fuzz fuzz-corpus demo sim faults faults-short soak freshness busy-day sim-reads fleet-scale fleet-process-scale fleet-cluster fleet-sim-long nats-compat chaos-long merge-sim

all: fmt vet test

test:
	$(GO) test -race ./...

vet:
	$(GO) vet ./...

fmt:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# Each fuzz target for FUZZTIME; new interesting inputs land in testdata/fuzz.
fuzz:
	@for pkg in ./plenty ./plenty/order ./plentysim ./diff ./state; do \
		for t in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# Go keeps the inputs that found new coverage in its cache; this copies the
# FUZZKEEP smallest of each target into testdata/fuzz, where `go test`
# replays them as regression tests (a failing input lands there by itself).
FUZZKEEP ?= 40
fuzz-corpus:
	@cache="$$($(GO) env GOCACHE)/fuzz/$$($(GO) list -m)"; \
	for dir in $$(find "$$cache" -mindepth 2 -maxdepth 3 -type d -name 'Fuzz*' 2>/dev/null); do \
		rel=$${dir#"$$cache"/}; pkg=$${rel%/*}; t=$${rel##*/}; \
		$(GO) test -list="^$$t\$$" ./$$pkg | grep -qx "$$t" || continue; \
		mkdir -p "$$pkg/testdata/fuzz/$$t"; \
		ls -Sr "$$dir" | head -n $(FUZZKEEP) | while read -r f; do cp -n "$$dir/$$f" "$$pkg/testdata/fuzz/$$t/"; done; \
		echo "$$pkg/testdata/fuzz/$$t: $$(ls "$$pkg/testdata/fuzz/$$t" | wc -l) inputs"; \
	done

sim:
	$(GO) run ./cmd/plentysim

# The hot standby's seeded randomized test at length: CHAOS_SEEDS seeds,
# CHAOS_FOR of faults each (NATS operations failing, answered late or
# lost, kills, stalls, 429s and spent daily quotas at random instants).
CHAOS_SEEDS ?= 20
CHAOS_FOR ?= 40s
chaos-long:
	$(GO) test -race -count=1 -timeout=0 -run 'TestTakeoverChaos' -v ./replica -args -chaos-long -chaos-seeds=$(CHAOS_SEEDS) -chaos-for=$(CHAOS_FOR)

# The group's merges (budget, sessions, waits) at length: MERGE_SEEDS seeds
# of each seeded randomized test from MERGE_FIRST (a failing seed prints
# its replay command); TAKEOVER_DAYS simulated 26-hour days of two replicas
# taking over from each other every few minutes (about 20 s each).
MERGE_SEEDS ?= 20000
MERGE_FIRST ?= 1
TAKEOVER_DAYS ?= 20
merge-sim:
	$(GO) test -count=1 -timeout=0 -run 'TestBudgetMergeSimulation|TestSessionsMergeSimulation|TestWaitsMergeSimulation' ./poller ./plenty -args -merge-sim-seeds=$(MERGE_SEEDS) -merge-sim-first=$(MERGE_FIRST)
	$(GO) test -count=1 -timeout=0 -run TestBudgetTakeoverDaySimulation ./poller -args -takeover-day-seeds=$(TAKEOVER_DAYS) -takeover-day-first=$(MERGE_FIRST) -takeover-day-hours=26

# The fault suite at full length: the real binary under kill -9 (50 cycles),
# a 30 s NATS outage, tight limits and 429 storms, garbage responses, short
# token lifetimes, a second instance, the state disk full (and, as root,
# read-only at start), SIGTERM under load, a bulk second worked through one
# order per call, a Date header 2 h ahead, a spent daily quota and readiness
# during a first sync; and the restart scenarios (docs/reliability.md): an
# undecodable order under load (TestFaultQuarantineUnderLoad), rejected fresh
# tokens and lost login/renewal answers with kill -9 inside the waits
# (TestFaultSessions*), a restart inside a session-limit wait
# (TestFaultSessionLimit*), every PubAck lost and NATS down longer than the
# duplicate window (TestFaultLostAckOutageLongerThanWindow), a restart inside
# a spent-quota wait, the resume after the reset and a restart storm
# (TestFaultBudget*), the service's Date header 2 h ahead or behind for
# minutes, a kill -9 inside the skew and the service's clock set back for good
# (TestFaultClock*), the hot standby (TestFaultStandby). All match
# -run 'TestFault'. A plain `go test` runs only the nine quick scenarios
# (quickFaults in faults/delivery_test.go); every other one needs
# -args -faults (short variants) or -args -fault-long (full length,
# implies -faults).
faults:
	$(GO) test -run 'TestFault' -v -timeout 90m ./faults -args -fault-long
	$(GO) test -run 'TestCrashConsistency' -v -timeout 30m ./poller -args -crash-cycles=60

# The short variant of every fault scenario (about 25 minutes on two cores).
faults-short:
	$(GO) test -run 'TestFault' -v -timeout 60m ./faults -args -faults

# 30 minutes at three times a busy shop's change rate, a random fault every
# minute; logs heap, goroutines and state file size each minute.
soak:
	$(GO) test -run 'TestSoak' -v -timeout 60m ./faults -args -soak=30m

# Detection latency at 1, 5 and 20 changes/s and a first sync of 100,000
# orders, real binary, the service's default limits (about 6 minutes).
freshness:
	$(GO) test -run 'TestFreshness' -v -timeout 30m ./faults -args -freshness

# 24 simulated hours of a busy shop (20 changes/s) through the Run loop from
# a drained bucket (day 3 of a busy week): calls per hour and latency (~3 min).
busy-day:
	BUSY_HOURS=24 $(GO) test -run TestBusyHoursFromADrainedBucket -v -timeout 30m ./poller

# The read ledger's randomized simulation in its long mode (poller/readsim_test.go):
# SIM_HOURS simulated hours of busy shops in seeds of SIM_MINUTES, from seed SIM_FIRST
# (a failing seed prints its replay command).
SIM_HOURS ?= 1000
SIM_FIRST ?= 1001
SIM_MINUTES ?= 60
sim-reads:
	$(GO) test -run 'TestReadLedgerSimulation' -v -timeout 0 ./poller -args -sim-hours=$(SIM_HOURS) -sim-first=$(SIM_FIRST) -sim-minutes=$(SIM_MINUTES) -sim-busy

# Fleet mode at scale (docs/fleet.md "Measured"): 1,000 shops on 3 members in
# one process, then on 3 processes of the binary, each with a kill of one;
# and a fleet on a 3-node NATS cluster losing a server.
fleet-scale:
	FLEET_SCALE_SHOPS=1000 $(GO) test -run 'TestFleetScale$$' -v -timeout 30m ./fleet
fleet-process-scale:
	FLEET_PROCESS_SHOPS=1000 $(GO) test -run TestFleetProcessScale -v -timeout 30m ./fleet
# The fleet's randomized simulation at length: 5 new seeds of 120 moves
# (joins, leaves, kills, pauses, registry edits read late, members lacking
# a password, the members bucket deleted); a failing seed prints its replay.
fleet-sim-long:
	$(GO) test -race -run 'TestFleetRandomized' -v -timeout 60m ./fleet -args -fleet-sim-long
fleet-cluster:
	FLEET_CLUSTER=1 $(GO) test -race -run TestFleetOnNATSCluster -v -timeout 10m ./fleet

# The lease, mirror, replica and fleet tests against each NATS server release still in use
# (2.10 onward: 2.10 has no per-key TTL markers), each installed into
# NATSBIN/<version> and started as a binary (ORDERWATCH_NATS_SERVER) on a
# free port with -js and a temporary store. A plain `go test` uses the
# server in process.
NATS_VERSIONS ?= v2.10.27 v2.11.17 v2.12.15 v2.14.10 latest
NATSBIN ?= $(CURDIR)/.natsbin
nats-compat:
	@for v in $(NATS_VERSIONS); do \
		d="$(NATSBIN)/$$v"; \
		GOBIN="$$d" $(GO) install github.com/nats-io/nats-server/v2@$$v || exit 1; \
		echo "== nats-server $$v ($$("$$d/nats-server" --version))"; \
		ORDERWATCH_NATS_SERVER="$$d/nats-server" $(GO) test -race -count=1 ./lease/ ./mirror/ ./replica/ ./fleet/ || exit 1; \
	done
