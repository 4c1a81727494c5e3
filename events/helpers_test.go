package events_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func newHTTPServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
