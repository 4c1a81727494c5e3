package plentysim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// filterHarness is a simulator holding testOrders and a token for it.
func filterHarness(t *testing.T) (*harness, string) {
	t.Helper()
	h := newHarness(t, Config{})
	for _, o := range testOrders(t) {
		h.sim.AddOrder(o)
	}
	return h, h.login()
}

// testOrders is a small system with every filter kind represented.
func testOrders(t *testing.T) []Order {
	ts := func(s string) time.Time { return mustTime(t, s) }
	return []Order{
		{ID: 1000, StatusID: "5", ReferrerID: "1", TypeID: 1, LockStatus: LockUnlocked, LocationID: "1", OwnerID: "3",
			CreatedAt: ts("2026-11-20T09:14:03+01:00"), UpdatedAt: ts("2026-11-22T10:02:41+01:00"),
			ItemIDs: []int64{101}, VariationIDs: []int64{1011}, Properties: map[int]string{3: "6000", 4: "paid"},
			Relations: map[string]int64{"contact_receiver": 500, "warehouse_sender": 1}},
		{ID: 1001, StatusID: "5.1", ReferrerID: "4.01", TypeID: 1, LockStatus: LockPermanent,
			CreatedAt: ts("2026-11-20T11:40:17+01:00"), UpdatedAt: ts("2026-11-22T10:02:41+01:00"),
			ItemIDs: []int64{102, 103}, VariationIDs: []int64{1021, 1031}, Properties: map[int]string{4: "unpaid"},
			Relations: map[string]int64{"warehouse_sender": 2}},
		{ID: 1002, StatusID: "11.1", ReferrerID: "0", TypeID: 3, OwnerID: "12",
			CreatedAt: ts("2026-03-29T01:59:59+01:00"), UpdatedAt: ts("2026-11-22T10:02:45+01:00")},
		{ID: 1003, StatusID: "7.01", ReferrerID: "1", TypeID: 1, LockStatus: LockReversible, LocationID: "2", OwnerID: "3",
			CreatedAt: ts("2026-11-22T09:59:01+01:00"), UpdatedAt: ts("2026-11-22T10:02:47+01:00"),
			ItemIDs: []int64{101, 104}, VariationIDs: []int64{1012, 1041}, Properties: map[int]string{3: "6001", 7: "EXT-1"},
			Relations: map[string]int64{"contact_receiver": 501, "warehouse_sender": 1}},
		{ID: 1004, StatusID: "5.10", ReferrerID: "2.08", TypeID: 1,
			CreatedAt: ts("2026-11-21T12:00:00+01:00"), UpdatedAt: ts("2026-11-22T10:03:00+01:00"),
			ItemIDs: []int64{105}, VariationIDs: []int64{1051}, Properties: map[int]string{4: ""}},
		{ID: 1005, StatusID: "9", ReferrerID: "1", TypeID: 4,
			CreatedAt: ts("2026-11-21T18:00:00+01:00"), UpdatedAt: ts("2026-11-22T10:05:00+01:00"),
			ItemIDs: []int64{106}, VariationIDs: []int64{1061}, Properties: map[int]string{4: "paid"},
			Relations: map[string]int64{"contact_receiver": 502}},
	}
}

var allIDs = []int64{1000, 1001, 1002, 1003, 1004, 1005}

func TestSimpleFilters(t *testing.T) {
	h, tok := filterHarness(t)
	tests := []struct {
		query string // raw query; values already URL-encoded
		want  []int64
	}{
		{"", allIDs},
		// statusId: decimals compared as decimals (5.1 == 5.10, 9 < 11.1).
		{"statusId=5", []int64{1000}},
		{"statusId=5.1", []int64{1001, 1004}},
		{"statusId=eq:5.10", []int64{1001, 1004}},
		{"statusId=in:5,11.1", []int64{1000, 1002}},
		{"statusId=not:5", []int64{1001, 1002, 1003, 1004, 1005}},
		{"statusId=lt:5.7", []int64{1000, 1001, 1004}},
		{"statusId=lte:5.1", []int64{1000, 1001, 1004}},
		{"statusId=gt:7", []int64{1002, 1003, 1005}},
		{"statusId=gt:11", []int64{1002}},
		{"statusId=lt:11.1", []int64{1000, 1001, 1003, 1004, 1005}},
		{"statusId=gte:11.1", []int64{1002}},
		{"statusId=between:5.1,9", []int64{1001, 1003, 1004, 1005}},
		{"statusId=%2B5", []int64{1000}},
		{"statusId=5&statusId=9", []int64{1005}}, // the last value counts
		// referrerId
		{"referrerId=4.01", []int64{1001}},
		{"referrerId=gt:1", []int64{1001, 1004}},
		{"referrerId=in:0,2.08", []int64{1002, 1004}},
		// orderTypeId
		{"orderTypeId=1", []int64{1000, 1001, 1003, 1004}},
		{"orderTypeId=not:1", []int64{1002, 1005}},
		{"orderTypeId=in:3,4", []int64{1002, 1005}},
		{"orderTypeId=gte:3", []int64{1002, 1005}},
		{"orderTypeId=between:2,3", []int64{1002}},
		// orderId
		{"orderId=1003", []int64{1003}},
		{"orderId=gt:1003", []int64{1004, 1005}},
		{"orderId=lt:1001", []int64{1000}},
		{"orderId=lte:1001", []int64{1000, 1001}},
		{"orderId=between:1001,1002", []int64{1001, 1002}},
		// itemId, itemVariationId: any item matches; not = no item equal
		{"itemId=101", []int64{1000, 1003}},
		{"itemId=not:101", []int64{1001, 1002, 1004, 1005}},
		{"itemId=in:102,105", []int64{1001, 1004}},
		{"itemId=gt:104", []int64{1004, 1005}},
		{"itemId=between:103,104", []int64{1001, 1003}},
		{"itemVariationId=1021", []int64{1001}},
		{"itemVariationId=lt:1012", []int64{1000}},
		// createdAt, updatedAt: instants, any offset
		{"createdAt=between:2026-11-20T00:00:00%2B01:00,2026-11-21T00:00:00%2B01:00", []int64{1000, 1001}},
		{"createdAt=2026-11-20T09:14:03%2B01:00", []int64{1000}},
		{"createdAt=eq:2026-11-20T08:14:03Z", []int64{1000}},
		{"createdAt=lt:2026-11-20T08:14:03Z", []int64{1002}},
		{"createdAt=lte:2026-11-20T08:14:03Z", []int64{1000, 1002}},
		{"updatedAt=gte:2026-11-22T10:02:45%2B01:00", []int64{1002, 1003, 1004, 1005}},
		{"updatedAt=gt:2026-11-22T09:02:45Z", []int64{1003, 1004, 1005}},
		{"updatedAt=not:2026-11-22T10:02:41%2B01:00", []int64{1002, 1003, 1004, 1005}},
		{"updatedAt=in:2026-11-22T10:02:41%2B01:00,2026-11-22T09:05:00Z", []int64{1000, 1001, 1005}},
		{"updatedAt=between:2026-11-22T10:02:41.5%2B01:00,2026-11-22T10:02:47%2B01:00", []int64{1002, 1003}},
		// orderProperty_<typeId>: strings
		{"orderProperty_4=paid", []int64{1000, 1005}},
		{"orderProperty_4=not:paid", []int64{1001, 1002, 1003, 1004}},
		{"orderProperty_4=in:paid,unpaid", []int64{1000, 1001, 1005}},
		{"orderProperty_4=eq:", []int64{1004}},
		{"orderProperty_3=6001", []int64{1003}},
		// relationReference_<entity>_<role>
		{"relationReference_contact_receiver=500", []int64{1000}},
		{"relationReference_contact_receiver=gt:500", []int64{1003, 1005}},
		{"relationReference_contact_receiver=not:500", []int64{1001, 1002, 1003, 1004, 1005}},
		{"relationReference_contact_receiver=between:501,502", []int64{1003, 1005}},
		{"relationReference_warehouse_sender=in:1,2", []int64{1000, 1001, 1003}},
		// several filters: all apply
		{"orderTypeId=1&statusId=5.1", []int64{1001, 1004}},
		{"orderTypeId=1&itemId=101&updatedAt=gt:2026-11-22T10:02:41%2B01:00", []int64{1003}},
		// unknown filters are ignored silently
		{"fooBar=1", allIDs},
		{"statusID=5", allIDs},
		{"orderProperty_x=1", allIDs},
		{"relationReference_contact=1", allIDs},
		// non-filter parameters
		{"sortBy=orderId&statusId=5&lazyLoaded=false&with=", []int64{1000}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q := "sortOrder=asc"
			if tt.query != "" {
				q += "&" + tt.query
			}
			for _, body := range [][]byte{nil, []byte("")} { // GET, POST without body
				env := h.search(tok, q, body)
				if got := env.ids(t); !slices.Equal(got, tt.want) {
					t.Errorf("post=%v: ids %v, want %v", body != nil, got, tt.want)
				}
				if env.TotalsCount != len(tt.want) {
					t.Errorf("totalsCount %d, want %d", env.TotalsCount, len(tt.want))
				}
			}
		})
	}
}

func TestComplexFilters(t *testing.T) {
	h, tok := filterHarness(t)
	cond := func(field, op, value string) string {
		return fmt.Sprintf(`{"field":%q,"operator":%q,"value":%s}`, field, op, value)
	}
	and := func(conds ...string) string {
		return `{"conditionType":"and","fields":[` + strings.Join(conds, ",") + `]}`
	}
	tests := []struct {
		name  string
		query string
		body  string
		want  []int64
	}{
		{"empty group", "", `{}`, allIDs},
		{"null body", "", `null`, allIDs},
		{"empty or", "", `{"conditionType":"or","fields":[],"groups":[]}`, allIDs},
		// statusId
		{"status eq number", "", and(cond("statusId", "eq", "5.1")), []int64{1001, 1004}},
		{"status eq string", "", and(cond("statusId", "eq", `"5.10"`)), []int64{1001, 1004}},
		{"status not", "", and(cond("statusId", "not", "5")), []int64{1001, 1002, 1003, 1004, 1005}},
		{"status in", "", and(cond("statusId", "in", `[5,"11.1"]`)), []int64{1000, 1002}},
		{"status nin", "", and(cond("statusId", "nin", `[5,5.1]`)), []int64{1002, 1003, 1005}},
		{"status lt", "", and(cond("statusId", "lt", "5.7")), []int64{1000, 1001, 1004}},
		{"status lte", "", and(cond("statusId", "lte", `"7.01"`)), []int64{1000, 1001, 1003, 1004}},
		{"status gt", "", and(cond("statusId", "gt", "9")), []int64{1002}},
		{"status gte", "", and(cond("statusId", "gte", "9")), []int64{1002, 1005}},
		{"status between", "", and(cond("statusId", "between", `[5.1,7.01]`)), []int64{1001, 1003, 1004}},
		{"status exponent", "", and(cond("statusId", "eq", `5.1e0`)), []int64{1001, 1004}},
		{"status null", "", and(cond("statusId", "null", "null")), nil},
		{"status nn", "", and(cond("statusId", "nn", "null")), allIDs},
		{"status nn without value", "", `{"fields":[{"field":"statusId","operator":"nn"}]}`, allIDs},
		// referrerId
		{"referrer between", "", and(cond("referrerId", "between", `["1",4.01]`)), []int64{1000, 1001, 1003, 1004, 1005}},
		// integers
		{"type nin", "", and(cond("orderTypeId", "nin", `[1]`)), []int64{1002, 1005}},
		{"order in", "", and(cond("orderId", "in", `[1000,"1005"]`)), []int64{1000, 1005}},
		{"order between", "", and(cond("orderId", "between", `[1002,1003]`)), []int64{1002, 1003}},
		{"item null", "", and(cond("itemId", "null", "null")), []int64{1002}},
		{"item nn", "", and(cond("itemId", "nn", "null")), []int64{1000, 1001, 1003, 1004, 1005}},
		{"item nin", "", and(cond("itemId", "nin", `[101,102]`)), []int64{1002, 1004, 1005}},
		{"variation gte", "", and(cond("itemVariationId", "gte", "1041")), []int64{1003, 1004, 1005}},
		// timestamps
		{"created between", "", and(cond("createdAt", "between", `["2026-11-21T00:00:00+01:00","2026-11-22T23:59:59+01:00"]`)), []int64{1003, 1004, 1005}},
		{"updated lt", "", and(cond("updatedAt", "lt", `"2026-11-22T10:02:45+01:00"`)), []int64{1000, 1001}},
		{"updated nn", "", and(cond("updatedAt", "nn", "null")), allIDs},
		{"created null", "", and(cond("createdAt", "null", "null")), nil},
		{"updated nin", "", and(cond("updatedAt", "nin", `["2026-11-22T09:02:41Z"]`)), []int64{1002, 1003, 1004, 1005}},
		// properties
		{"property nn", "", and(cond("orderProperty_7", "nn", "null")), []int64{1003}},
		{"property null", "", and(cond("orderProperty_4", "null", "null")), []int64{1002, 1003, 1004}},
		{"property nin", "", and(cond("orderProperty_4", "nin", `["paid"]`)), []int64{1001, 1002, 1003, 1004}},
		{"property eq number", "", and(cond("orderProperty_3", "eq", "6000")), []int64{1000}},
		{"property not", "", and(cond("orderProperty_3", "not", `"6000"`)), []int64{1001, 1002, 1003, 1004, 1005}},
		{"property in", "", and(cond("orderProperty_4", "in", `["unpaid",""]`)), []int64{1001, 1004}},
		// relations
		{"relation null", "", and(cond("relationReference_contact_receiver", "null", "null")), []int64{1001, 1002, 1004}},
		{"relation nn", "", and(cond("relationReference_contact_receiver", "nn", "null")), []int64{1000, 1003, 1005}},
		{"relation eq", "", and(cond("relationReference_warehouse_sender", "eq", "2")), []int64{1001}},
		{"relation lte", "", and(cond("relationReference_contact_receiver", "lte", "501")), []int64{1000, 1003}},
		// groups
		{"or with nested and", "", `{"conditionType":"or","fields":[` + cond("statusId", "eq", "5") + `],"groups":[` +
			and(cond("orderTypeId", "eq", "3"), cond("statusId", "gt", "10")) + `]}`, []int64{1000, 1002}},
		{"and with nested or", "", `{"conditionType":"and","fields":[` + cond("orderTypeId", "eq", "1") + `],"groups":[` +
			`{"conditionType":"or","fields":[` + cond("statusId", "eq", "5") + `,` + cond("itemId", "eq", "104") + `]}]}`, []int64{1000, 1003}},
		{"deep nesting", "", `{"conditionType":"or","groups":[{"conditionType":"and","groups":[{"conditionType":"or","fields":[` +
			cond("orderId", "eq", "1000") + `]}]}]}`, []int64{1000}},
		{"upper-case condition type", "", `{"conditionType":"OR","fields":[` + cond("orderId", "eq", "1000") + `,` + cond("orderId", "eq", "1001") + `]}`, []int64{1000, 1001}},
		{"unknown field dropped from or", "", `{"conditionType":"or","fields":[` + cond("statusId", "eq", "5") + `,` + cond("fooBar", "eq", "1") + `]}`, []int64{1000}},
		{"only unknown fields", "", `{"conditionType":"or","fields":[` + cond("fooBar", "like", "1") + `]}`, allIDs},
		// query and body together
		{"query and body", "orderTypeId=1", and(cond("statusId", "in", `[5.1,11.1]`)), []int64{1001, 1004}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := "sortOrder=asc"
			if tt.query != "" {
				q += "&" + tt.query
			}
			env := h.search(tok, q, []byte(tt.body))
			if got := env.ids(t); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("ids %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSearchErrors(t *testing.T) {
	h, tok := filterHarness(t)
	tests := []struct {
		query, body string
		want        string // part of the error message
	}{
		{"statusId=abc", "", "invalid decimal"},
		{"statusId=5,1", "", "invalid decimal"},
		{"statusId=", "", "invalid decimal"},
		{"statusId=between:5", "", "exactly 2"},
		{"statusId=between:1,2,3", "", "exactly 2"},
		{"statusId=like:5", "", "unknown operator"},
		{"statusId=nin:5", "", "unknown operator"},
		{"orderProperty_4=lt:x", "", "not applicable to a string filter"},
		{"orderProperty_4=between:a,b", "", "not applicable to a string filter"},
		{"orderId=1.5", "", "invalid integer"},
		{"itemId=in:1,x", "", "invalid integer"},
		{"createdAt=2026-11-20T09:14:03+01:00", "", "invalid timestamp"},
		{"updatedAt=yesterday", "", "invalid timestamp"},
		{"updatedAt=gte:2026-11-20", "", "invalid timestamp"},
		{"sortBy=updatedAt", "", "sortBy"},
		{"sortOrder=up", "", "sortOrder"},
		{"statusId=%zz", "", "malformed query"},
		{"", `{"fields":[{"field":"statusId","operator":"like","value":5}]}`, "unknown operator"},
		{"", `{"fields":[{"field":"statusId","operator":"in","value":5}]}`, "takes an array"},
		{"", `{"fields":[{"field":"statusId","operator":"eq","value":[5]}]}`, "not a decimal"},
		{"", `{"fields":[{"field":"statusId","operator":"null","value":5}]}`, "takes the value null"},
		{"", `{"fields":[{"field":"statusId","operator":"between","value":[1,2,3]}]}`, "exactly 2"},
		{"", `{"fields":[{"field":"statusId","operator":"eq","value":"five"}]}`, "invalid decimal"},
		{"", `{"fields":[{"field":"orderId","operator":"eq","value":1.5}]}`, "invalid integer"},
		{"", `{"fields":[{"field":"orderProperty_4","operator":"gte","value":"a"}]}`, "not applicable to a string filter"},
		{"", `{"fields":[{"field":"orderProperty_4","operator":"eq","value":true}]}`, "is not a string"},
		{"", `{"fields":[{"field":"createdAt","operator":"gt","value":1763800000}]}`, "is not a timestamp"},
		{"", `{"fields":[{"field":"createdAt","operator":"gt","value":"2026-11-20 09:14:03"}]}`, "invalid timestamp"},
		{"", `{"fields":[{"field":"statusId","operator":"eq"}]}`, "value missing"},
		{"", `{"conditionType":"xor"}`, "conditionType"},
		{"", `{"fields":[`, "invalid JSON"},
		{"", `[]`, "JSON object"},
		{"", `{"groups":[1]}`, "JSON object"},
		{"", `{"fields":{"field":"statusId"}}`, "invalid JSON"},
		{"", strings.Repeat(`{"groups":[`, 40) + strings.Repeat(`]}`, 40), "nested deeper"},
	}
	for _, tt := range tests {
		t.Run(tt.query+tt.body, func(t *testing.T) {
			method, body := http.MethodGet, []byte(nil)
			if tt.body != "" {
				method, body = http.MethodPost, []byte(tt.body)
			}
			r := h.do(method, PathSearch+"?"+tt.query, tok, body)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			var e struct {
				Error struct {
					Message string
					Code    int
				}
			}
			if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code != 400 || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("body %s, want code 400 and a message with %q", r.body, tt.want)
			}
			if r.header.Get("X-Plenty-Global-Short-Period-Limit") == "" {
				t.Error("no throttle headers on a 400")
			}
		})
	}
}

// TestPlusSign: a "+" sent unencoded arrives as a space (net/http decodes
// the query as PHP does); the simulator does not repair it.
func TestPlusSign(t *testing.T) {
	h, tok := filterHarness(t)
	raw := h.do(http.MethodGet, PathSearch+"?updatedAt=gte:2026-11-22T10:02:45+01:00", tok, nil)
	if raw.status != http.StatusBadRequest || !strings.Contains(string(raw.body), `2026-11-22T10:02:45 01:00`) {
		t.Errorf("unencoded +: %d %s", raw.status, raw.body)
	}
	want := []int64{1005, 1004, 1003, 1002}
	if got := h.search(tok, "updatedAt=gte:2026-11-22T10:02:45%2B01:00", nil).ids(t); !slices.Equal(got, want) {
		t.Errorf("%%2B: ids %v, want %v", got, want)
	}
	enc := url.Values{"updatedAt": {"gte:2026-11-22T10:02:45+01:00"}}.Encode()
	if got := h.search(tok, enc, nil).ids(t); !slices.Equal(got, want) {
		t.Errorf("url.Values %s: ids %v, want %v", enc, got, want)
	}
}

func TestSort(t *testing.T) {
	h, tok := filterHarness(t)
	desc := []int64{1005, 1004, 1003, 1002, 1001, 1000}
	tests := []struct {
		query string
		want  []int64
	}{
		{"", desc},
		{"sortBy=orderId", desc},
		{"sortOrder=desc", desc},
		{"sortOrder=asc", allIDs},
		{"sortOrder=ASC&sortBy=orderId", allIDs},
		{"sortOrder=asc&statusId=in:5,9", []int64{1000, 1005}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			if got := h.search(tok, tt.query, nil).ids(t); !slices.Equal(got, tt.want) {
				t.Errorf("ids %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPagination(t *testing.T) {
	h := newHarness(t, Config{DefaultItemsPerPage: 4, MaxItemsPerPage: 5})
	for range 7 {
		h.sim.AddOrder(Order{})
	}
	tok := h.login()
	type page struct {
		page, total, last, first, lastOn, per int
		isLast                                bool
		ids                                   []int64
	}
	tests := []struct {
		query string
		want  page
	}{
		{"", page{1, 7, 2, 1, 4, 4, false, []int64{1006, 1005, 1004, 1003}}},
		{"page=2", page{2, 7, 2, 5, 7, 4, true, []int64{1002, 1001, 1000}}},
		{"sortOrder=asc&itemsPerPage=3", page{1, 7, 3, 1, 3, 3, false, []int64{1000, 1001, 1002}}},
		{"sortOrder=asc&itemsPerPage=3&page=2", page{2, 7, 3, 4, 6, 3, false, []int64{1003, 1004, 1005}}},
		{"sortOrder=asc&itemsPerPage=3&page=3", page{3, 7, 3, 7, 7, 3, true, []int64{1006}}},
		{"sortOrder=asc&itemsPerPage=3&page=4", page{4, 7, 3, 0, 0, 3, true, nil}},
		{"sortOrder=asc&itemsPerPage=3&page=99999999999999", page{99999999999999, 7, 3, 0, 0, 3, true, nil}},
		{"sortOrder=asc&itemsPerPage=100", page{1, 7, 2, 1, 5, 5, false, []int64{1000, 1001, 1002, 1003, 1004}}},
		{"sortOrder=asc&itemsPerPage=0&page=0", page{1, 7, 2, 1, 4, 4, false, []int64{1000, 1001, 1002, 1003}}},
		{"sortOrder=asc&itemsPerPage=x&page=-1", page{1, 7, 2, 1, 4, 4, false, []int64{1000, 1001, 1002, 1003}}},
		{"orderId=gt:1005", page{1, 1, 1, 1, 1, 4, true, []int64{1006}}},
		{"orderId=gt:2000", page{1, 0, 1, 0, 0, 4, true, nil}},
		{"orderId=gt:2000&page=3", page{3, 0, 1, 0, 0, 4, true, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			env := h.search(tok, tt.query, nil)
			got := page{
				total: env.TotalsCount, last: env.LastPageNumber, first: env.FirstOnPage,
				lastOn: env.LastOnPage, per: env.ItemsPerPage, isLast: env.IsLastPage, ids: env.ids(t),
			}
			if err := json.Unmarshal(env.Page, &got.page); err != nil {
				t.Fatalf("page %s: %v", env.Page, err)
			}
			if len(got.ids) == 0 {
				got.ids = nil
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestEnvelopeFixtures: pages built to match the shared fixtures byte for byte.
func TestEnvelopeFixtures(t *testing.T) {
	t.Run("empty", func(t *testing.T) {
		h := newHarness(t, Config{})
		r := h.do(http.MethodGet, PathSearch, h.login(), nil)
		if got, want := string(r.body), compact(t, fixture(t, "search-page-empty.json")); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("strings", func(t *testing.T) {
		h := newHarness(t, Config{PageAsString: true, StatusStyle: StatusString})
		h.sim.AddOrder(Order{ID: 8999})
		h.sim.AddOrder(Order{ID: 9000})
		h.sim.AddOrder(Order{ID: 9001, ReferrerID: "2.08", StatusID: "5.7", LocationID: "1", OwnerID: "3",
			CreatedAt: PHPZeroDate, UpdatedAt: mustTime(t, "2026-07-01T12:00:00+02:00")})
		r := h.do(http.MethodGet, PathSearch+"?sortOrder=asc&itemsPerPage=2&page=2", h.login(), nil)
		if got, want := string(r.body), compact(t, fixture(t, "search-page-strings.json")); got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
	t.Run("entries", func(t *testing.T) {
		var fix struct{ Entries []json.RawMessage }
		if err := json.Unmarshal(fixture(t, "search-page.json"), &fix); err != nil {
			t.Fatal(err)
		}
		ts := func(s string) time.Time { return mustTime(t, s) }
		tests := []struct {
			style StatusStyle
			order Order
			entry int    // index in the fixture
			fixup string // the fixture shows roundTotalsOnly false, the simulator always true
		}{
			{StatusNumber, Order{ID: 2301, ReferrerID: "1", TypeID: 1, LockStatus: LockUnlocked, LocationID: "1", OwnerID: "3", StatusID: "5",
				CreatedAt: ts("2026-11-20T09:14:03+01:00"), UpdatedAt: ts("2026-11-22T10:02:41+01:00")}, 0, ""},
			{StatusNumber, Order{ID: 2302, ReferrerID: "4.01", TypeID: 1, LockStatus: LockPermanent, LocationID: "1", StatusID: "5.1",
				CreatedAt: ts("2026-11-20T10:40:17Z"), UpdatedAt: ts("2026-11-22T09:02:41Z")}, 1, ""},
			{StatusMixed, Order{ID: 2307, ReferrerID: "0", TypeID: 3, LocationID: "1", OwnerID: "12", StatusID: "11.1",
				CreatedAt: ts("2026-03-29T00:59:59Z"), UpdatedAt: ts("2026-11-22T10:02:45+01:00")}, 2, "roundTotalsOnly"},
			{StatusNumber, Order{ID: 2310, ReferrerID: "1", TypeID: 1, LockStatus: LockReversible, LocationID: "2", OwnerID: "3", StatusID: "7.01",
				CreatedAt: ts("2026-11-22T09:59:01+01:00"), UpdatedAt: ts("2026-11-22T10:02:47+01:00")}, 3, ""},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprint(tt.order.ID), func(t *testing.T) {
				h := newHarness(t, Config{StatusStyle: tt.style})
				h.sim.AddOrder(tt.order)
				var env struct{ Entries []json.RawMessage }
				r := h.do(http.MethodGet, PathSearch, h.login(), nil)
				if err := json.Unmarshal(r.body, &env); err != nil || len(env.Entries) != 1 {
					t.Fatalf("%s: %v", r.body, err)
				}
				want := compact(t, fix.Entries[tt.entry])
				if tt.fixup != "" {
					want = strings.Replace(want, `"roundTotalsOnly":false`, `"roundTotalsOnly":true`, 1)
				}
				if got := string(env.Entries[0]); got != want {
					t.Errorf("got  %s\nwant %s", got, want)
				}
			})
		}
	})
}

func TestStatusStyles(t *testing.T) {
	tests := []struct {
		style StatusStyle
		// kind of statusId (and referrerId) and of locationId by order id
		status, location func(id int64) byte
	}{
		{StatusNumber, func(int64) byte { return 'n' }, func(int64) byte { return 's' }},
		{StatusString, func(int64) byte { return 's' }, func(int64) byte { return 's' }},
		{StatusMixed,
			func(id int64) byte { return "ns"[1-id%2] },
			func(id int64) byte { return map[bool]byte{true: 'n', false: 's'}[id%3 == 0] }},
	}
	kind := func(raw json.RawMessage) byte {
		if raw[0] == '"' {
			return 's'
		}
		return 'n'
	}
	for _, tt := range tests {
		t.Run(string(tt.style), func(t *testing.T) {
			h := newHarness(t, Config{StatusStyle: tt.style, Seed: 3})
			h.sim.Generate(60, h.clock.Now().Add(-time.Hour), h.clock.Now())
			env := h.search(h.login(), "itemsPerPage=60", nil)
			for _, e := range env.Entries {
				var id int64
				_ = json.Unmarshal(e["id"], &id)
				for _, f := range []string{"statusId", "referrerId"} {
					if got, want := kind(e[f]), tt.status(id); got != want {
						t.Errorf("order %d %s %s: kind %c, want %c", id, f, e[f], got, want)
					}
				}
				if got, want := kind(e["locationId"]), tt.location(id); got != want {
					t.Errorf("order %d locationId %s: kind %c, want %c", id, e["locationId"], got, want)
				}
			}
		})
	}
}

func TestOrderItems(t *testing.T) {
	h, tok := filterHarness(t)
	for _, q := range []string{"lazyLoaded=true", "with=orderItems", "with[]=orderItems&with[]=addresses"} {
		env := h.search(tok, "orderId=1001&"+q, nil)
		want := `[{"id":100101,"orderId":1001,"itemId":102,"itemVariationId":1021},{"id":100102,"orderId":1001,"itemId":103,"itemVariationId":1031}]`
		if got := string(env.Entries[0]["orderItems"]); got != want {
			t.Errorf("%s: orderItems %s, want %s", q, got, want)
		}
	}
	if env := h.search(tok, "orderId=1001", nil); env.Entries[0]["orderItems"] != nil {
		t.Errorf("lazy loaded entry has orderItems %s", env.Entries[0]["orderItems"])
	}
}

func TestHeadersAndRoutes(t *testing.T) {
	h := newHarness(t, Config{Location: time.UTC})
	h.sim.AddOrder(Order{CreatedAt: mustTime(t, "2026-11-20T09:14:03+01:00")})
	tok := h.login()

	t.Run("Date from the server clock", func(t *testing.T) {
		h.clock.Advance(90 * time.Minute)
		r := h.do(http.MethodGet, PathSearch, tok, nil)
		if got, want := r.header.Get("Date"), h.clock.Now().UTC().Format(http.TimeFormat); got != want {
			t.Errorf("Date %q, want %q", got, want)
		}
	})
	t.Run("Location", func(t *testing.T) {
		env := h.search(tok, "", nil)
		if got := string(env.Entries[0]["createdAt"]); got != `"2026-11-20T08:14:03Z"` {
			t.Errorf("createdAt %s", got)
		}
	})
	t.Run("Accept recorded", func(t *testing.T) {
		const accept = "application/x.plentymarkets.v1+json"
		h.do(http.MethodGet, PathSearch, tok, nil, "Accept", accept)
		if got := h.sim.Stats().LastAccept; got != accept {
			t.Errorf("LastAccept %q", got)
		}
	})
	t.Run("not found", func(t *testing.T) {
		for _, req := range []struct{ method, path string }{
			{http.MethodGet, "/rest/items"},
			{http.MethodGet, PathLogin},
			{http.MethodPut, PathSearch},
			{http.MethodGet, PathSearch + "/"},
			{http.MethodGet, "/"},
		} {
			r := h.do(req.method, req.path, tok, nil)
			if r.status != http.StatusNotFound || string(r.body) != `{"error":{"message":"Not Found","code":404}}` ||
				r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Plenty-Global-Long-Period-Limit") == "" {
				t.Errorf("%s %s: %d %v %s", req.method, req.path, r.status, r.header, r.body)
			}
		}
	})
}
