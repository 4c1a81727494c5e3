package plentysim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// searchQuery is a validated order search request.
type searchQuery struct {
	page, perPage int
	asc           bool
	rels          relationSet // relations to render: orderItems (lazyLoaded=true or with=orderItems), with=addresses,amounts,payments
	conds         []Condition
	group         *Group
}

func (q *searchQuery) match(o *Order) bool {
	for i := range q.conds {
		if !q.conds[i].match(o) {
			return false
		}
	}
	return q.group == nil || q.group.match(o)
}

// fault is the fault drawn for one search request.
type fault uint8

const (
	faultNone fault = iota
	faultServerError
	faultHTML
	faultTruncate
	faultGarbage
	faultDrop
)

var (
	serverErrorBody = []byte(`{"error":{"message":"Internal Server Error","code":500}}`)
	badGatewayPage  = []byte("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
	phpNotice       = []byte("<br />\n<b>Notice</b>:  Undefined index: statusId in <b>/var/www/plenty/app/Order/Search.php</b> on line <b>214</b><br />\n")
)

// drawFaultLocked draws the fault and the extra delay of one search
// request. It always draws the same number of values, so the sequence
// depends only on the seed and the number of search requests.
func (s *Server) drawFaultLocked() (fault, time.Duration) {
	f := s.faults
	rng := s.faultRNG
	delay := f.Latency
	if rng.Float64() < f.SlowRate {
		delay += f.SlowDelay
	}
	got := faultNone
	for i, rate := range []float64{f.ServerErrorRate, f.HTMLRate, f.TruncateRate, f.GarbageRate, f.DropRate} {
		if rng.Float64() < rate && got == faultNone {
			got = fault(i + 1)
		}
	}
	return got, delay
}

func (s *Server) countFault() {
	s.ctl.Lock()
	s.stats.FaultsInjected++
	s.ctl.Unlock()
}

func (s *Server) serveSearch(w http.ResponseWriter, r *http.Request, now time.Time) {
	s.ctl.Lock()
	s.stats.SearchCalls++
	sess := s.sessionLocked(bearerToken(r), now)
	key := addrKey(r)
	if sess != nil {
		key = sess.user
	}
	rej := s.admitLocked(w.Header(), r, key, s.limits.SearchCost, true, now)
	var (
		f      fault
		delay  time.Duration
		before = s.beforeSearch
		shift  bool
	)
	switch {
	case rej != nil:
	case sess == nil:
		s.stats.Unauthorized401++
	default:
		f, delay = s.drawFaultLocked()
		// Drawn only when asked for: the other faults' sequence per seed
		// stays as it was.
		shift = s.faults.ChangeWhilePaging > 0 && s.faultRNG.Float64() < s.faults.ChangeWhilePaging
	}
	s.ctl.Unlock()
	switch {
	case rej != nil:
		writeJSON(w, http.StatusTooManyRequests, rej.body)
		return
	case sess == nil:
		writeJSON(w, http.StatusUnauthorized, unauthenticatedBody)
		return
	}

	q, err := s.parseSearch(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody(err.Error(), http.StatusBadRequest))
		return
	}
	if delay > 0 && !sleepCtx(r.Context(), delay) {
		return // the client is gone
	}
	if before != nil {
		before(r, q.page)
	}
	if shift && q.page > 1 {
		s.changeOneMatch(&q)
	}
	switch f {
	case faultServerError:
		s.countFault()
		writeJSON(w, http.StatusInternalServerError, serverErrorBody)
		return
	case faultHTML:
		s.countFault()
		h := w.Header()
		h.Set("Content-Type", "text/html")
		h.Set("Content-Length", strconv.Itoa(len(badGatewayPage)))
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write(badGatewayPage)
		return
	}
	body := s.renderPage(&q)
	switch f {
	case faultTruncate:
		s.countFault()
		writeJSON(w, http.StatusOK, body[:len(body)/2])
	case faultGarbage:
		s.countFault()
		writeJSON(w, http.StatusOK, append(slices.Clip(phpNotice), body...))
	case faultDrop:
		s.countFault()
		dropConnection(w, body)
	default:
		writeJSON(w, http.StatusOK, body)
	}
}

// changeOneMatch advances the updatedAt of one order of q's result set (the
// middle one), as a change made by someone else between two page requests
// of a scan (Faults.ChangeWhilePaging).
func (s *Server) changeOneMatch(q *searchQuery) {
	now := s.nowSecond()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.matchesLocked(q)
	if len(m) == 0 {
		return
	}
	s.applyLocked(int(m[len(m)/2]), now, func(*Order) Change { return Change{Kind: KindTouch} })
}

// sleepCtx waits d; it returns false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// dropConnection announces the whole body, sends half of it and closes the
// connection. Without a hijackable connection (HTTP/2) it aborts the
// response instead.
func dropConnection(w http.ResponseWriter, body []byte) {
	part := body[:len(body)/2]
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	rc := http.NewResponseController(w)
	if conn, buf, err := rc.Hijack(); err == nil {
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\n")
		_ = h.Write(buf)
		_, _ = buf.WriteString("\r\n")
		_, _ = buf.Write(part)
		_ = buf.Flush()
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(part)
	_ = rc.Flush()
	panic(http.ErrAbortHandler)
}

// parseSearch validates the query parameters and the complex filter body.
// Of a parameter given several times the last value counts, as in PHP.
func (s *Server) parseSearch(r *http.Request) (searchQuery, error) {
	q := searchQuery{page: 1, perPage: s.cfg.DefaultItemsPerPage}
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return q, fmt.Errorf("malformed query string: %v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		v := vals[name][len(vals[name])-1]
		switch name {
		case "sortBy":
			if v != "" && v != "orderId" {
				return q, fmt.Errorf("sortBy %q is not supported: the sort key is orderId", v)
			}
		case "sortOrder":
			switch strings.ToLower(v) {
			case "", "desc":
			case "asc":
				q.asc = true
			default:
				return q, fmt.Errorf("sortOrder %q: want asc or desc", v)
			}
		case "page":
			if n, err := strconv.Atoi(v); err == nil && n >= 1 {
				q.page = n
			}
		case "itemsPerPage":
			if n, err := strconv.Atoi(v); err == nil && n >= 1 {
				q.perPage = min(n, s.cfg.MaxItemsPerPage)
			}
		case "lazyLoaded":
			if v == "true" || v == "1" {
				q.rels |= withItems
			}
		case "with", "with[]":
			for _, each := range vals[name] {
				q.rels.parseWith(each)
			}
		default:
			c, err := ParseSimpleFilter(name, v)
			if errors.Is(err, ErrUnknownFilter) {
				continue
			}
			if err != nil {
				return q, err
			}
			q.conds = append(q.conds, c)
		}
	}
	if r.Method != http.MethodPost {
		return q, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return q, fmt.Errorf("reading the request body: %v", err)
	}
	if len(body) > maxBody {
		return q, fmt.Errorf("request body larger than %d bytes", maxBody)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return q, nil
	}
	g, err := ParseComplexFilter(body)
	if err != nil {
		return q, err
	}
	if len(g.Fields)+len(g.Groups) > 0 {
		q.group = g
	}
	return q, nil
}

// renderPage filters the orders, sorts them by id and renders the page in
// the envelope of the fixtures.
func (s *Server) renderPage(q *searchQuery) []byte {
	per := q.perPage
	offset := math.MaxInt - per
	if q.page-1 <= (math.MaxInt-per)/per {
		offset = (q.page - 1) * per
	}
	end := offset + per

	entries := make([]byte, 0, min(per, 256)*360)
	s.mu.RLock()
	matches := s.matchesLocked(q)
	total := len(matches)
	shown := 0
	for pos := offset; pos < min(end, total); pos++ {
		k := pos
		if !q.asc {
			k = total - 1 - pos
		}
		if shown > 0 {
			entries = append(entries, ',')
		}
		entries = s.appendEntry(entries, &s.orders[matches[k]], q.rels)
		shown++
	}
	s.mu.RUnlock()

	lastPage := max(1, (total+per-1)/per)
	first, last := 0, 0
	if shown > 0 {
		first, last = offset+1, offset+shown
	}
	b := make([]byte, 0, len(entries)+192)
	b = append(b, `{"page":`...)
	if s.cfg.PageAsString {
		b = append(b, '"')
		b = strconv.AppendInt(b, int64(q.page), 10)
		b = append(b, '"')
	} else {
		b = strconv.AppendInt(b, int64(q.page), 10)
	}
	b = append(b, `,"totalsCount":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"isLastPage":`...)
	b = strconv.AppendBool(b, q.page >= lastPage)
	b = append(b, `,"lastPageNumber":`...)
	b = strconv.AppendInt(b, int64(lastPage), 10)
	b = append(b, `,"firstOnPage":`...)
	b = strconv.AppendInt(b, int64(first), 10)
	b = append(b, `,"lastOnPage":`...)
	b = strconv.AppendInt(b, int64(last), 10)
	b = append(b, `,"itemsPerPage":`...)
	b = strconv.AppendInt(b, int64(per), 10)
	b = append(b, `,"entries":[`...)
	b = append(b, entries...)
	return append(b, "]}"...)
}

// matchesLocked returns the indices in s.orders of the orders matching the
// filters of q, ascending. The page requests of one scan share their
// filters, so the result is cached per filter until the orders change:
// paging through N orders costs O(N), not O(N) per page. The caller holds
// s.mu (read or write).
func (s *Server) matchesLocked(q *searchQuery) []int32 {
	key := q.filterKey()
	if m, ok := s.results.get(key, s.version); ok {
		return m
	}
	var m []int32
	for i := range s.orders {
		if q.match(&s.orders[i]) {
			m = append(m, int32(i))
		}
	}
	s.results.put(key, s.version, m)
	return m
}

// filterKey identifies the filters of a query (not its paging or sorting).
func (q *searchQuery) filterKey() string {
	var b strings.Builder
	for _, c := range q.conds {
		b.WriteString(c.String())
		b.WriteByte(0)
	}
	if q.group != nil {
		b.Write(q.group.appendJSON(nil))
	}
	return b.String()
}

// resultCache keeps the latest filter results; entries of an older version
// of the orders are never returned.
type resultCache struct {
	mu      sync.Mutex
	entries []cachedResult // least recently used first
}

type cachedResult struct {
	key     string
	version uint64
	matches []int32
}

const resultCacheSize = 8

func (c *resultCache) get(key string, version uint64) ([]int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range c.entries {
		if e.key == key && e.version == version {
			c.entries = append(slices.Delete(c.entries, i, i+1), e)
			return e.matches, true
		}
	}
	return nil, false
}

func (c *resultCache) put(key string, version uint64, matches []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = slices.DeleteFunc(c.entries, func(e cachedResult) bool { return e.key == key || e.version != version })
	if len(c.entries) == resultCacheSize {
		c.entries = slices.Delete(c.entries, 0, 1)
	}
	c.entries = append(c.entries, cachedResult{key, version, matches})
}

// appendEntry renders one order as the service does (fixtures/search-page.json).
func (s *Server) appendEntry(b []byte, o *Order, rels relationSet) []byte {
	style := s.cfg.StatusStyle
	asString := style == StatusString || (style == StatusMixed && o.ID%2 == 0)
	corrupt := s.corruptionLocked(o.ID)
	b = append(b, `{"id":`...)
	if corrupt == CorruptID {
		b = appendCorruptID(b, o.ID)
	} else {
		b = strconv.AppendInt(b, o.ID, 10)
	}
	b = append(b, `,"referrerId":`...)
	b = appendDecimalText(b, o.ReferrerID, asString)
	b = append(b, `,"roundTotalsOnly":true,"numberOfDecimals":2,"plentyId":`...)
	b = strconv.AppendInt(b, o.PlentyID, 10)
	b = append(b, `,"typeId":`...)
	b = strconv.AppendInt(b, o.TypeID, 10)
	b = append(b, `,"lockStatus":`...)
	b = appendJSONString(b, o.LockStatus)
	b = append(b, `,"locationId":`...)
	if style == StatusMixed && o.ID%3 == 0 && isUintText(o.LocationID) {
		b = append(b, o.LocationID...)
	} else {
		b = appendJSONString(b, o.LocationID)
	}
	b = append(b, `,"createdAt":`...)
	b = s.appendTime(b, o.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = s.appendTime(b, o.UpdatedAt)
	b = append(b, `,"statusId":`...)
	if corrupt == CorruptStatus {
		b = append(b, corruptStatus...)
	} else {
		b = appendDecimalText(b, o.StatusID, asString)
	}
	b = append(b, `,"ownerId":`...)
	if o.OwnerID == "" {
		b = append(b, "null"...)
	} else {
		b = appendJSONString(b, o.OwnerID)
	}
	if rels&withItems != 0 && !hasRaw(o, RelItems) {
		b = append(b, `,"orderItems":[`...)
		for i := range max(len(o.ItemIDs), len(o.VariationIDs)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, o.ID*100+int64(i)+1, 10)
			b = append(b, `,"orderId":`...)
			b = strconv.AppendInt(b, o.ID, 10)
			if i < len(o.ItemIDs) {
				b = append(b, `,"itemId":`...)
				b = strconv.AppendInt(b, o.ItemIDs[i], 10)
			}
			if i < len(o.VariationIDs) {
				b = append(b, `,"itemVariationId":`...)
				b = strconv.AppendInt(b, o.VariationIDs[i], 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = appendRelations(b, o, rels)
	return append(b, '}')
}

// appendDecimalText appends validated decimal text as a JSON number or string.
func appendDecimalText(b []byte, text string, asString bool) []byte {
	if asString {
		b = append(b, '"')
		b = append(b, text...)
		return append(b, '"')
	}
	return append(b, text...)
}

// phpZeroDate is how the service renders its zero date.
const phpZeroDate = `"-0001-11-30T00:00:00+01:00"`

// appendTime appends a timestamp as RFC 3339 in the configured location.
func (s *Server) appendTime(b []byte, t time.Time) []byte {
	if isNullTime(t) {
		return append(b, phpZeroDate...)
	}
	b = append(b, '"')
	b = t.In(s.cfg.Location).AppendFormat(b, time.RFC3339)
	return append(b, '"')
}

// isUintText reports whether s is an unsigned integer in JSON number syntax.
func isUintText(s string) bool {
	if s == "" || len(s) > 18 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
