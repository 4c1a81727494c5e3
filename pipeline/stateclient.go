package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// StateQuery is what `watcher state` asks for: the report (the zero
// value), one order, or a page of a listing, of a single-shop watcher or
// of one shop of a fleet member.
type StateQuery struct {
	OrderID int64
	List    url.Values // GET /state/orders's parameters (ParseListQuery); nil: no listing
	Shop    string     // a fleet member's shop: its /shops/{id}/ endpoints; "": a single-shop watcher
}

// ErrNotTracked is the error of an order the watcher does not track.
var ErrNotTracked = errors.New("not tracked")

// Path is the query's path on a watcher's HTTP port: /state,
// /state/orders/{id} or /state/orders?..., under /shops/{id} for a shop
// of a fleet member.
func (q StateQuery) Path() string {
	path := "/state"
	switch {
	case q.List != nil:
		path = "/state/orders?" + q.List.Encode()
	case q.OrderID != 0:
		path = fmt.Sprintf("/state/orders/%d", q.OrderID)
	}
	if q.Shop != "" {
		path = "/shops/" + url.PathEscape(q.Shop) + path
	}
	return path
}

// AskState asks a running watcher at base (its WATCHER_HTTP_ADDR as a
// URL: http://127.0.0.1:9464 for `watcher demo`) over HTTP, without its
// state file, and returns the JSON answer. An order it does not track is
// an error wrapping ErrNotTracked.
func AskState(ctx context.Context, base string, q StateQuery) ([]byte, error) {
	base = strings.TrimRight(base, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	code, body, err := GetLocal(ctx, base, q.Path())
	switch {
	case err != nil:
		return nil, fmt.Errorf("no watcher answered at %s: %w", base, err)
	case code == http.StatusNotFound && q.OrderID != 0 && bytes.Contains(body, []byte(ErrNotTracked.Error())):
		return nil, fmt.Errorf("order %d is %w by the watcher at %s", q.OrderID, ErrNotTracked, base)
	case code != http.StatusOK:
		return nil, fmt.Errorf("GET %s%s answered %d: %s", base, q.Path(), code, bytes.TrimSpace(body))
	}
	return body, nil
}
