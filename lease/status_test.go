package lease_test

import (
	"context"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStatusReadsAreShared: the leases of a fleet share one handle of the
// lease bucket, and after a member died hundreds of them read its status
// at once (Lease.hold, after the key's write): those asking while a read
// is under way share the next one, so the server answers a few stream
// info requests, not one per lease; every caller gets the bucket's status.
func TestStatusReadsAreShared(t *testing.T) {
	s := runServer(t)
	kv, _, _ := conn(t, s)
	spy, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(spy.Close)
	infos := make(chan *nats.Msg, 1000) // filled by the reading loop: counted once the spy's Flush returns
	sub, err := spy.ChanSubscribe("$JS.API.STREAM.INFO.KV_test_lease", infos)
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	const callers = 100
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			st, err := kv.Status(context.Background())
			if err == nil && st.(*jetstream.KeyValueBucketStatus).StreamInfo().Created.IsZero() {
				t.Error("a status without the bucket's creation time")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = sub.Unsubscribe()
	if n := len(infos); n < 1 || n > callers/4 {
		t.Errorf("%d callers at once made %d stream info requests; want a few (shared), at least one", callers, n)
	}
}
