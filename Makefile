# Developer targets. CI runs .ci/run, which runs the README's test command.
GO ?= go
FUZZTIME ?= 60s

.PHONY: all test vet fmt bench fuzz demo sim faults soak

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
	@for pkg in ./plenty ./plentysim ./diff ./state; do \
		for t in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

sim:
	$(GO) run ./cmd/plentysim

# The fault suite at full length: the real binary under kill -9 (50 cycles),
# a 30 s NATS outage, 429 storms, garbage responses, short token lifetimes,
# a second instance and SIGTERM under load. `go test` runs a short variant.
faults:
	$(GO) test -run 'TestFault' -v -timeout 60m ./cmd/watcher -args -fault-long
	$(GO) test -run 'TestCrashConsistency' -v -timeout 30m ./poller -args -crash-cycles=60

# 30 minutes at three times a busy shop's change rate, a random fault every
# minute; logs heap, goroutines and state file size each minute.
soak:
	$(GO) test -run 'TestSoak' -v -timeout 60m ./cmd/watcher -args -soak=30m
