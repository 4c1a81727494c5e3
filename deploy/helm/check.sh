#!/usr/bin/env bash
# Checks the orderwatch Helm chart without a cluster:
#   1. testdata/env-vars.txt still equals the variables `watcher help` lists;
#   2. helm lint --strict with the default values and every fixture, at the
#      chart's minimum Kubernetes version and a current one;
#   3. helm template of each fixture into a temp dir;
#   4. go vet + go test of the chart module (deploy/helm/go.mod) on those files.
#
# Usage: deploy/helm/check.sh            (from anywhere)
#        UPDATE_ENV_VARS=1 deploy/helm/check.sh   rewrites testdata/env-vars.txt
#        RENDER_DIR=/some/dir deploy/helm/check.sh  keeps the rendered manifests
#        HELM=/path/to/helm deploy/helm/check.sh    uses that helm binary
# Without helm on PATH it installs the pinned one with `go install` (the first
# build takes a few minutes; later runs reuse the binary).
set -euo pipefail

HELM_VERSION=v3.22.0
# helm v3.22.0 is built against client-go v0.37: the release ldflags set its
# default Kubernetes version from that (otherwise go install leaves it at 1.20).
HELM_K8S_MINOR=37
KUBE_MIN=1.25.0    # Chart.yaml kubeVersion; chart_test.go renders with the same
KUBE_LATEST=1.37.0 # lint's API deprecation checks against a current cluster
RELEASE=orderwatch # chart_test.go expects these two
NAMESPACE=orderwatch

start=$SECONDS
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
chart=$here/orderwatch
gobin=$(go env GOBIN)
[ -n "$gobin" ] || gobin=$(go env GOPATH | cut -d: -f1)/bin
export PATH="$PATH:$gobin"

step() { printf '\n== %s\n' "$*"; }

# --- helm -------------------------------------------------------------------
if [ -z "${HELM:-}" ]; then
	if command -v helm >/dev/null 2>&1; then
		HELM=$(command -v helm)
	else
		step "installing helm $HELM_VERSION into $gobin (go install; the first build takes minutes)"
		go install -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM_K8S_MINOR \
-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM_K8S_MINOR" \
			"helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
		HELM=$gobin/helm
	fi
fi
helm_version=$("$HELM" version --template '{{.Version}}')
case $helm_version in
v3.*) ;;
*)
	echo "check.sh: $HELM is helm $helm_version; the chart is checked with helm v3 (HELM=... or go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION)" >&2
	exit 1
	;;
esac
echo "helm: $HELM ($helm_version; pinned for installs: $HELM_VERSION)"
export HELM

# --- 1. the variables the chart may set ------------------------------------
step "env-vars.txt == the variables of \`watcher help\`"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$root" && go run ./cmd/watcher help) >"$work/help.txt"; then
	echo "check.sh: \`go run ./cmd/watcher help\` failed; cannot check testdata/env-vars.txt" >&2
	exit 1
fi
sed -n 's/^| `\(WATCHER_[A-Z0-9_]*\)`.*/\1/p' "$work/help.txt" >"$work/env-vars.txt"
if [ ! -s "$work/env-vars.txt" ]; then
	echo "check.sh: found no WATCHER_ variables in \`watcher help\`; has its table format changed?" >&2
	exit 1
fi
if [ "${UPDATE_ENV_VARS:-}" = 1 ]; then
	cp "$work/env-vars.txt" "$here/testdata/env-vars.txt"
	echo "rewrote testdata/env-vars.txt"
elif ! diff -u "$here/testdata/env-vars.txt" "$work/env-vars.txt"; then
	echo "check.sh: testdata/env-vars.txt is stale (- fixture, + watcher help). Rerun with UPDATE_ENV_VARS=1," >&2
	echo "then map any new variable to a chart value (chart_test.go fails until full-values.yaml sets it)." >&2
	exit 1
fi
echo "$(wc -l <"$work/env-vars.txt") variables, unchanged"

# --- 2. lint ----------------------------------------------------------------
# name=values file (relative to deploy/helm). "default" is the chart's
# defaults plus the three values the schema requires (required-values.yaml);
# chart_test.go checks that values.yaml alone is refused.
cases=("default=testdata/required-values.yaml" "full=testdata/full-values.yaml" "ephemeral=testdata/ephemeral-values.yaml"
	"fleet=testdata/fleet-values.yaml" "fleet-example=orderwatch/examples/fleet-values.yaml")
for c in "${cases[@]}"; do
	name=${c%%=*} values=${c#*=}
	for kv in "$KUBE_MIN" "$KUBE_LATEST"; do
		step "helm lint --strict: $name values, Kubernetes $kv"
		(cd "$here" && "$HELM" lint --strict --kube-version "$kv" --values "$values" "$chart")
	done
done

# --- 3. render --------------------------------------------------------------
out=${RENDER_DIR:-$work/rendered}
mkdir -p "$out"
for c in "${cases[@]}"; do
	name=${c%%=*} values=${c#*=}
	step "helm template: $name -> $out/$name.yaml"
	(cd "$here" && "$HELM" template "$RELEASE" "$chart" --namespace "$NAMESPACE" --kube-version "$KUBE_MIN" \
		--values "$values") >"$out/$name.yaml"
	grep -c '^kind:' "$out/$name.yaml" | sed 's/$/ objects/'
done

# --- 4. Go tests of the chart module ---------------------------------------
step "go vet + go test (deploy/helm module)"
(
	cd "$here"
	unformatted=$(gofmt -l .)
	if [ -n "$unformatted" ]; then
		echo "gofmt: not formatted: $unformatted" >&2
		exit 1
	fi
	go vet ./...
	ORDERWATCH_RENDERED_DIR=$out go test -count=1 ./...
)

echo
echo "check.sh: OK in $((SECONDS - start))s"
