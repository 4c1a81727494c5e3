package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
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

// maxStateAnswer bounds what AskState reads: a listing's largest page
// (10,000 orders) takes a few megabytes.
const maxStateAnswer = 64 << 20

// askTimeout bounds one question to a watcher.
const askTimeout = 30 * time.Second

// AskState asks a running watcher at base (its WATCHER_HTTP_ADDR as a
// URL: http://127.0.0.1:9464 for `watcher demo`) over HTTP, without its
// state file, and returns the JSON answer. An order it does not track is
// an error wrapping ErrNotTracked. What is not a watcher's answer (an
// HTML page, a fleet member asked without its shop) is an error that
// says so.
func AskState(ctx context.Context, base string, q StateQuery) ([]byte, error) {
	base = WatcherBase(base)
	a, err := getAnswer(ctx, base+q.Path())
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("the watcher at %s did not answer in time: %w", base, err)
	case err != nil && a.code != 0: // it answered; reading the answer failed
		return nil, fmt.Errorf("the answer of %s: %w", base, err)
	case err != nil:
		return nil, fmt.Errorf("no watcher answered at %s: %w", base, err)
	case a.code == http.StatusNotFound && q.OrderID != 0 && bytes.Contains(a.body, []byte(ErrNotTracked.Error())):
		return nil, fmt.Errorf("order %d is %w by the watcher at %s", q.OrderID, ErrNotTracked, base)
	case q.Shop == "" && (a.code == http.StatusNotFound || a.code == http.StatusOK && a.json() && q.List == nil && q.OrderID == 0):
		if shops := memberShops(ctx, base, a); shops != "" {
			return nil, fmt.Errorf("%s is a fleet member (WATCHER_SHOPS_FILE): name the shop with -shop (%s)", base, shops)
		}
	case q.Shop != "" && a.code == http.StatusNotFound:
		if shops := memberShops(ctx, base, answer{}); shops != "" {
			return nil, fmt.Errorf("the fleet member at %s does not run shop %s: ask the member that does (%s)", base, q.Shop, shops)
		}
	}
	switch {
	case a.code == http.StatusNotFound:
		return nil, fmt.Errorf("GET %s%s answered 404: %s (is %s the watcher's HTTP port, WATCHER_HTTP_ADDR?)", base, q.Path(), a.excerpt(), base)
	case a.code != http.StatusOK:
		return nil, fmt.Errorf("GET %s%s answered %d: %s", base, q.Path(), a.code, a.excerpt())
	case !a.json():
		return nil, fmt.Errorf("GET %s%s answered %s, not a watcher's JSON: is %s the watcher's HTTP port (WATCHER_HTTP_ADDR)?", base, q.Path(), a.excerpt(), base)
	}
	return a.body, nil
}

// WatcherBase is the address of a watcher's HTTP port from what a user
// gives as -url: with http:// when it has no scheme, and without an
// endpoint of the port pasted with it (/state/orders?status=5 from the
// demo's banner, /state, /metrics, /readyz, /healthz). A fleet member's
// shop path (/shops/{id}) stays.
func WatcherBase(u string) string {
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	u, _, _ = strings.Cut(u, "#")
	u, _, _ = strings.Cut(u, "?")
	return endpointSuffix.ReplaceAllString(strings.TrimRight(u, "/"), "")
}

var endpointSuffix = regexp.MustCompile(`(/state(/orders(/[^/]*)?)?|/metrics|/readyz|/healthz)$`)

// answer is an HTTP answer, read whole.
type answer struct {
	code  int
	ctype string
	body  []byte
}

func getAnswer(ctx context.Context, u string) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return answer{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxStateAnswer+1))
	if err == nil && len(b) > maxStateAnswer {
		err = fmt.Errorf("GET %s: the answer is larger than %d MiB (page it with a smaller -limit)", u, maxStateAnswer>>20)
	}
	return answer{code: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}, err
}

func (a answer) json() bool {
	mt, _, _ := mime.ParseMediaType(a.ctype)
	return mt == "application/json"
}

// excerpt is the answer for an error message: its first line, cut short;
// an HTML page by its title.
func (a answer) excerpt() string {
	mt, _, _ := mime.ParseMediaType(a.ctype)
	body := bytes.TrimSpace(a.body)
	if mt == "text/html" || bytes.HasPrefix(bytes.ToLower(body), []byte("<!doctype html")) || bytes.HasPrefix(bytes.ToLower(body), []byte("<html")) {
		title := ""
		if m := htmlTitle.FindSubmatch(body); m != nil {
			title = fmt.Sprintf(" titled %q", cut(string(bytes.TrimSpace(m[1])), 80))
		}
		return fmt.Sprintf("an HTML page%s (%d bytes)", title, len(a.body))
	}
	line, _, _ := bytes.Cut(body, []byte("\n"))
	return cut(string(line), 200)
}

var htmlTitle = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// memberShops is, when base is a fleet member (its /state is the fleet's
// report), the shops it knows and who runs them, as a -shop hint; "" when
// it is not one. a is the answer already read from base.
func memberShops(ctx context.Context, base string, a answer) string {
	if a.code != http.StatusOK || !a.json() || !bytes.Contains(a.body, []byte(`"members"`)) {
		var err error
		if a, err = getAnswer(ctx, base+"/state"); err != nil || a.code != http.StatusOK || !a.json() {
			return ""
		}
	}
	var fleet struct {
		Members map[string]json.RawMessage `json:"members"`
		Shops   []struct {
			ID     string `json:"id"`
			Holder string `json:"holder"`
		} `json:"shops"`
	}
	if json.Unmarshal(a.body, &fleet) != nil || fleet.Members == nil {
		return ""
	}
	var names []string
	for _, s := range fleet.Shops {
		switch {
		case s.Holder == "":
			names = append(names, s.ID+" (free)")
		default:
			names = append(names, s.ID+" on "+s.Holder)
		}
	}
	if len(names) == 0 {
		return "it knows no shop yet"
	}
	return cut(strings.Join(names, ", "), 300)
}
