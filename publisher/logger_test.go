package publisher_test

import (
	"testing"
)

// recordingTB records what a test logs and its cleanups (a fake testing.TB
// for this unit only: the real one panics on a Log after its test ended,
// but only once its parent has ended too, which one test cannot arrange).
type recordingTB struct {
	testing.TB
	logged   []string
	cleanups []func()
}

func (r *recordingTB) Log(args ...any) {
	for _, a := range args {
		r.logged = append(r.logged, a.(string))
	}
}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

// TestTBWriterStopsWhenTestEnds: a handler of the NATS client may log after
// the test that connected it has ended (its goroutine calls the closed
// handler after nc.Close returned); the test log writer must drop such lines
// instead of calling t.Log ("Log in goroutine after ... has completed").
func TestTBWriterStopsWhenTestEnds(t *testing.T) {
	tb := &recordingTB{}
	w := newTBWriter(tb)
	w.Write([]byte("during the test\n"))
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	n, err := w.Write([]byte("after the test\n"))
	if err != nil || n != len("after the test\n") {
		t.Errorf("Write after the test = %d, %v", n, err)
	}
	if len(tb.logged) != 1 || tb.logged[0] != "during the test" {
		t.Errorf("logged %q, want only the line written during the test", tb.logged)
	}
}
