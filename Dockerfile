# syntax=docker/dockerfile:1
# orderwatch: a static Go binary on distroless (no shell, no package manager).
#
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD) -t orderwatch .
#   docker buildx build --platform linux/amd64,linux/arm64 ...   (cross-compiles, no emulation)
#
# The chart (deploy/helm/orderwatch) runs it as uid/gid 65532 with a read-only
# root filesystem; state lives on the volume it mounts at /var/lib/orderwatch.

# Match go.mod's go line (go 1.26.8). The official image sets GOTOOLCHAIN=local,
# so the 1.26 image must be at least 1.26.8; pin GO_VERSION=1.26.8 to be exact.
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, in their own layer: rebuilt only when go.mod/go.sum change.
COPY go.mod go.sum ./
RUN go mod download && go mod verify
COPY . .
ARG VERSION=dev
# .git is not in the build context, so Go cannot stamp the revision itself.
ARG REVISION=
ARG TARGETOS TARGETARCH
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/watcher ./cmd/watcher

# static-debian12:nonroot: CA certificates, tzdata, /etc/passwd with nonroot = 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/watcher /watcher
USER 65532:65532
# /healthz, /readyz, /metrics (WATCHER_HTTP_ADDR, default :9090)
EXPOSE 9090
ENTRYPOINT ["/watcher"]
CMD ["run"]
