package events_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

func newHTTPServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// startJS is a JetStream client of an in-process NATS server.
func startJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	return testnats.JetStream(t, testnats.Start(t).ClientURL())
}
