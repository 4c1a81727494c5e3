#!/usr/bin/env bash
# A real Prometheus scraping `watcher demo` for a while, then every dashboard
# query and every alert evaluated through its HTTP API (evaluate-queries.py).
# Not part of CI (it needs minutes and Python 3); see docs/reliability.md,
# "Dashboard and alerts against a real Prometheus".
#
# Usage: deploy/helm/dev/prometheus-demo.sh [MINUTES]   (default 6)
# Builds prometheus (v0.316.0 = Prometheus 3.16, as .ci/run's promtool; about
# 4 min on 2 cores the first time) unless PROMETHEUS names a binary.
set -euo pipefail
minutes=${1:-6}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin=$(go env GOPATH | cut -d: -f1)/bin
prometheus=${PROMETHEUS:-$gobin/prometheus}
if [ -z "${PROMETHEUS:-}" ] && ! go version -m "$prometheus" 2>/dev/null | grep -q 'mod[[:space:]]*github.com/prometheus/prometheus[[:space:]]*v0.316.0'; then
	go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@v0.316.0
fi
(cd "$root" && go build -o "$work/watcher" ./cmd/watcher)

demo_pid= prom_pid=
cleanup() {
	[ -n "$demo_pid" ] && kill -INT "$demo_pid" 2>/dev/null || true
	[ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

"$work/watcher" demo >"$work/demo.out" 2>&1 &
demo_pid=$!
for _ in $(seq 50); do
	addr=$(sed -n 's|^  watcher   http://\([^/]*\)/metrics.*|\1|p' "$work/demo.out")
	[ -n "$addr" ] && break
	sleep 0.2
done
[ -n "$addr" ] || { echo "the demo did not print its metrics address" >&2; cat "$work/demo.out" >&2; exit 1; }

cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 15s, evaluation_interval: 15s}
rule_files: ["$root/deploy/helm/orderwatch/files/alerts.yaml"]
scrape_configs:
  - job_name: orderwatch
    static_configs: [{targets: ["$addr"]}]
YAML
listen=127.0.0.1:${PROMETHEUS_PORT:-19090}
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
	--web.listen-address="$listen" >"$work/prometheus.log" 2>&1 &
prom_pid=$!
start=$(date +%s)
echo "demo metrics on $addr, Prometheus on $listen; scraping for $minutes min"
sleep $((minutes * 60))
python3 "$here/evaluate-queries.py" "http://$listen" "$root/deploy/helm/orderwatch/files/dashboard.json" "$start"
