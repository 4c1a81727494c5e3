package examples_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/examples/internal/fixture"
)

// TestExamplesBuildAsACopy: the examples copied into a fresh module of
// another path, which gets orderwatch as a dependency (here by a replace
// directive to this checkout, as `go get` would), build unchanged:
// they import only public packages. The build is offline (GOPROXY=off):
// the module cache that `go mod download` filled is enough. The copy of
// examples/since then runs against a NATS server and prints the events.
func TestExamplesBuildAsACopy(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The repository's requirements, so that the copy builds with the
	// versions its go.sum and the module cache hold.
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := strings.Replace(string(gomod), "module github.com/orderwatch/orderwatch", "module example.com/ordersconsumer", 1) +
		"\nrequire github.com/orderwatch/orderwatch v0.0.0-00010101000000-000000000000\n\nreplace github.com/orderwatch/orderwatch => " + root + "\n"
	writeFile(t, filepath.Join(dir, "go.mod"), []byte(mod))
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, "go.sum"))
	// Every example, also one added later.
	mains, err := filepath.Glob(filepath.Join(root, "examples", "*", "main.go"))
	if err != nil || len(mains) < 3 {
		t.Fatalf("examples/*/main.go: %v, %v; want since, durable, alert-webhook and any other", mains, err)
	}
	for _, m := range mains {
		ex := filepath.Base(filepath.Dir(m))
		copyFile(t, m, filepath.Join(dir, ex, "main.go"))
	}

	bin := filepath.Join(dir, "bin") + string(filepath.Separator)
	build := exec.Command(goTool(), "build", "-o", bin, "./...")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the copied examples do not build in a module of their own: %v\n%s", err, out)
	}

	url, js := fixture.Start(t)
	fixture.Publish(t, js, fixture.StatusChanged(2302, "5", "6", 1), true)
	fixture.Publish(t, js, fixture.Created(2303, "3", 2), true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, filepath.Join(bin, "since"), "-nats", url, "-seq", "1")
	run.Env = []string{} // nothing from the environment
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Run(); err != nil {
		t.Fatalf("the copy of since: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"seq 1 stored ", ": order.status_changed order 2302: 5 -> 6", "seq 2 stored ", ": order.created order 2303: in status 3"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the copy of since printed no %q:\n%s", want, stdout.String())
		}
	}
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, b)
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
