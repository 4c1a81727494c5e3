package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// fixtureOrders are the decodable entries of every search page fixture of
// plenty/testdata: numbers and decimal strings, decimal statuses, a PHP zero
// createdAt, a null owner, a numeric locationId.
func fixtureOrders(t *testing.T) []order.Order {
	t.Helper()
	files, err := filepath.Glob("../plenty/testdata/search-page*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []order.Order
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		page, err := order.DecodePage(body)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, page.Orders...)
	}
	return out
}

// decideAll returns every event Decide produces for o: first sight as
// created and as discovered, and a change of status, lock and updatedAt
// from an earlier state (decimal, absent and string-typed values included).
func decideAll(o order.Order) []diff.Event {
	var evs []diff.Event
	add := func(prev *diff.State, opt diff.Options) {
		_, _, e := diff.Decide(prev, o, opt)
		evs = append(evs, e...)
	}
	// First sight: created (baseline before createdAt; not possible with
	// a zero createdAt) and discovered (baseline after it, or unknown).
	if !o.CreatedAt.IsZero() {
		add(nil, diff.Options{Baseline: o.CreatedAt.Add(-time.Hour)})
		add(nil, diff.Options{Baseline: o.CreatedAt.Add(time.Hour)})
	}
	add(nil, diff.Options{})

	// A change: everything tracked differs.
	prev := diff.StateOf(o)
	prev.StatusID = order.MustDecimal("5.10")
	prev.LockStatus = "reversibleLocked"
	prev.UpdatedAt = order.Time{Time: o.UpdatedAt.Add(-90 * time.Minute)}
	add(&prev, diff.Options{EmitUpdated: true})

	// From a state with absent values (null lock, owner, referrer, createdAt).
	bare := diff.State{StatusID: order.MustDecimal("1"), UpdatedAt: order.Time{Time: o.UpdatedAt.Add(-time.Minute)}}
	add(&bare, diff.Options{EmitUpdated: true})

	// From a state without a status (an entry that had no statusId: subject
	// token "none", statusId null).
	nostatus := diff.State{UpdatedAt: order.Time{Time: o.UpdatedAt.Add(-time.Minute)}}
	add(&nostatus, diff.Options{})
	return evs
}

func TestDecidedEventsValidate(t *testing.T) {
	seen := map[diff.Type]int{}
	features := map[string]bool{}
	for _, o := range fixtureOrders(t) {
		for _, ev := range decideAll(o) {
			b := diff.Encode(nil, ev, "https://shop.example/rest")
			if err := Validate(b); err != nil {
				t.Errorf("order %d %s does not validate: %v\n%s", o.ID, ev.Type, err, b)
			}
			seen[ev.Type]++
			s := string(b)
			features["decimal status"] = features["decimal status"] || strings.Contains(s, `"statusId":5.1,`) || strings.Contains(s, `"statusId":5.7,`)
			features["PHP zero createdAt"] = features["PHP zero createdAt"] || strings.Contains(s, "-0001-11-30")
			features["null createdAt"] = features["null createdAt"] || strings.Contains(s, `"createdAt":null`)
			features["null owner"] = features["null owner"] || strings.Contains(s, `"ownerId":null`)
			features["string status in the order"] = features["string status in the order"] || strings.Contains(s, `"statusId":"5.7"`)
			features["null lock before"] = features["null lock before"] || strings.Contains(s, `"before":{"statusId":1,"lockStatus":null`)
			features["null status before"] = features["null status before"] || strings.Contains(s, `"before":{"statusId":null`)
		}
	}
	for _, typ := range Types {
		if seen[diff.Type(typ)] == 0 {
			t.Errorf("no %s event was produced from the fixtures", typ)
		}
	}
	for _, f := range []string{"decimal status", "PHP zero createdAt", "null createdAt", "null owner", "string status in the order", "null lock before", "null status before"} {
		if !features[f] {
			t.Errorf("no event covers %s", f)
		}
	}
}

// validEvent is an encoded order.status_changed of fixture 2302 (statusId
// 5.1, null owner).
func validEvent(t *testing.T, typ diff.Type) map[string]any {
	t.Helper()
	for _, o := range fixtureOrders(t) {
		if o.ID != 2302 {
			continue
		}
		for _, ev := range decideAll(o) {
			if ev.Type == typ {
				var m map[string]any
				d := json.NewDecoder(bytes.NewReader(diff.Encode(nil, ev, "https://shop.example/rest")))
				d.UseNumber()
				if err := d.Decode(&m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
	}
	t.Fatalf("no %s event for order 2302", typ)
	return nil
}

func TestBrokenEventsAreRejected(t *testing.T) {
	data := func(m map[string]any) map[string]any { return m["data"].(map[string]any) }
	after := func(m map[string]any) map[string]any { return data(m)["after"].(map[string]any) }
	for _, tc := range []struct {
		name   string
		typ    diff.Type
		break_ func(m map[string]any)
		want   string // part of the error
	}{
		{"missing id", diff.StatusChanged, func(m map[string]any) { delete(m, "id") }, "id"},
		{"missing data.after.updatedAt", diff.StatusChanged, func(m map[string]any) { delete(after(m), "updatedAt") }, "updatedAt"},
		{"missing data.order", diff.LockChanged, func(m map[string]any) { delete(data(m), "order") }, "order"},
		{"order without id", diff.LockChanged, func(m map[string]any) { delete(data(m)["order"].(map[string]any), "id") }, "id"},
		{"unknown type", diff.StatusChanged, func(m map[string]any) { m["type"] = "order.deleted" }, "order.deleted"},
		{"before non-null on created", diff.Created, func(m map[string]any) { data(m)["before"] = after(m) }, "before"},
		{"before non-null on discovered", diff.Discovered, func(m map[string]any) { data(m)["before"] = after(m) }, "before"},
		{"before null on status_changed", diff.StatusChanged, func(m map[string]any) { data(m)["before"] = nil }, "before"},
		{"created without createdAt", diff.Created, func(m map[string]any) { after(m)["createdAt"] = nil }, "createdAt"},
		{"statusId as string", diff.StatusChanged, func(m map[string]any) { after(m)["statusId"] = "5.1" }, "statusId"},
		{"typeId as decimal", diff.StatusChanged, func(m map[string]any) { after(m)["typeId"] = json.Number("1.5") }, "typeId"},
		{"ownerId as number", diff.Updated, func(m map[string]any) { after(m)["ownerId"] = json.Number("3") }, "ownerId"},
		{"unknown state field", diff.Updated, func(m map[string]any) { after(m)["colour"] = "red" }, "colour"},
		{"updatedAt not a date-time", diff.StatusChanged, func(m map[string]any) { after(m)["updatedAt"] = "2026-11-22 10:02:41" }, "updatedAt"},
		{"wrong specversion", diff.StatusChanged, func(m map[string]any) { m["specversion"] = "0.3" }, "specversion"},
		{"wrong datacontenttype", diff.StatusChanged, func(m map[string]any) { m["datacontenttype"] = "text/plain" }, "datacontenttype"},
		{"subject not an id", diff.StatusChanged, func(m map[string]any) { m["subject"] = "orders.created.2302" }, "subject"},
		{"subject of another order", diff.StatusChanged, func(m map[string]any) { m["subject"] = "2303" }, "subject"},
		{"order id of another order", diff.StatusChanged, func(m map[string]any) { data(m)["order"].(map[string]any)["id"] = json.Number("9") }, "order.id"},
		{"time differs from updatedAt", diff.StatusChanged, func(m map[string]any) { m["time"] = "2026-11-22T09:02:41Z" }, "time"},
		{"extension attribute", diff.StatusChanged, func(m map[string]any) { m["traceparent"] = "00-x" }, "traceparent"},
		{"id not the hash form", diff.StatusChanged, func(m map[string]any) { m["id"] = "42" }, "id"},
		{"orderId as string", diff.StatusChanged, func(m map[string]any) { data(m)["orderId"] = "2302" }, "orderId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validEvent(t, tc.typ)
			tc.break_(m)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(b)
			if err == nil {
				t.Fatalf("accepted:\n%s", b)
			}
			if !strings.Contains(fmt.Sprintf("%#v", err)+err.Error(), tc.want) {
				t.Errorf("error does not mention %q: %v", tc.want, err)
			}
		})
	}

	// Wrong type const: an event validated against another type's schema.
	s, err := compiled()
	if err != nil {
		t.Fatal(err)
	}
	ev := validEvent(t, diff.LockChanged)
	if err := s["order.status_changed"].Validate(ev); err == nil || !strings.Contains(err.Error(), "order.status_changed") {
		t.Errorf("an order.lock_changed event passed the order.status_changed schema: %v", err)
	}

	// Tolerant where the service is: any field in the order.
	m := validEvent(t, diff.StatusChanged)
	data(m)["order"].(map[string]any)["orderItems"] = []any{map[string]any{"id": 1}}
	data(m)["order"].(map[string]any)["id"] = "2302"
	b, _ := json.Marshal(m)
	if err := Validate(b); err != nil {
		t.Errorf("extra order fields or a string order id rejected: %v", err)
	}

	for _, junk := range []string{``, `[]`, `{"type":"order.created"`, `"x"`} {
		if err := Validate([]byte(junk)); err == nil {
			t.Errorf("Validate(%q) accepted", junk)
		}
	}
}

func TestSchemaFiles(t *testing.T) {
	names, err := SchemaFiles()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"defs.json"}
	for _, typ := range Types {
		want = append(want, typ+".json")
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("events/ holds %v, want %v", names, want)
	}
	for _, n := range names {
		var doc struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		b, _ := Files.ReadFile(path.Join("events", n))
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || doc.ID != BaseURL+n {
			t.Errorf("%s: $schema %q, $id %q", n, doc.Schema, doc.ID)
		}
	}
	if _, err := compiled(); err != nil {
		t.Fatal(err)
	}
}

// The AsyncAPI document: JSON syntax (valid YAML), version 3.0, a channel,
// message and receive operation per event type, every address parameter
// declared, every $ref resolvable, and every subject diff produces matching
// its type's channel address.
func TestAsyncAPI(t *testing.T) {
	b, err := Files.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("asyncapi.yaml is not JSON-compatible YAML: %v", err)
	}
	if doc["asyncapi"] != "3.0.0" {
		t.Errorf("asyncapi version %v", doc["asyncapi"])
	}
	desc := doc["info"].(map[string]any)["description"].(string)
	for _, s := range []string{"exactly once", "Nats-Msg-Id", "duplicate window", "Core NATS mode", "orders.status_changed.*.8.>"} {
		if !strings.Contains(desc, s) {
			t.Errorf("description does not mention %q", s)
		}
	}
	// The prefix parameter, which every channel's address starts with,
	// says what it is in fleet mode: the shop's prefix (orders.berlin).
	prefix := doc["components"].(map[string]any)["parameters"].(map[string]any)["prefix"].(map[string]any)
	if d, _ := prefix["description"].(string); !strings.Contains(d, "WATCHER_SHOPS_FILE") || !strings.Contains(fmt.Sprint(prefix["examples"]), "orders.berlin") {
		t.Errorf("the prefix parameter does not say the fleet's prefix carries the shop: %v", prefix)
	}
	if srv := doc["servers"].(map[string]any)["nats"].(map[string]any); srv["protocol"] != "nats" {
		t.Errorf("server nats: protocol %v", srv["protocol"])
	}

	// Every $ref resolves: "#/..." in the document, a file in events/
	// otherwise (with a fragment resolved in that file).
	refs := 0
	walkRefs(doc, func(ref string) {
		refs++
		file, frag, _ := strings.Cut(ref, "#")
		target := doc
		if file != "" {
			fb, err := Files.ReadFile(path.Clean(file))
			if err != nil {
				t.Errorf("$ref %s: %v", ref, err)
				return
			}
			if err := json.Unmarshal(fb, &target); err != nil {
				t.Errorf("$ref %s: %v", ref, err)
				return
			}
		}
		if _, err := pointer(target, frag); err != nil {
			t.Errorf("$ref %s: %v", ref, err)
		}
	})
	if refs == 0 {
		t.Fatal("no $ref in asyncapi.yaml")
	}

	// Addresses: a channel per type; parameters declared; subjects match.
	channels := doc["channels"].(map[string]any)
	operations := doc["operations"].(map[string]any)
	address := map[string]*regexp.Regexp{}
	for name, c := range channels {
		ch := c.(map[string]any)
		addr := ch["address"].(string)
		params, _ := ch["parameters"].(map[string]any)
		var names []string
		for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(addr, -1) {
			names = append(names, m[1])
			if params[m[1]] == nil {
				t.Errorf("channel %s: parameter %s of %q not declared", name, m[1], addr)
			}
		}
		if len(params) != len(names) {
			t.Errorf("channel %s: parameters %v, address %q", name, params, addr)
		}
		for _, msg := range ch["messages"].(map[string]any) {
			m, err := pointer(doc, strings.TrimPrefix(msg.(map[string]any)["$ref"].(string), "#"))
			if err != nil {
				t.Fatal(err)
			}
			typ := m.(map[string]any)["name"].(string)
			schemaRef := m.(map[string]any)["payload"].(map[string]any)["schema"].(map[string]any)["$ref"]
			if schemaRef != "events/"+typ+".json" {
				t.Errorf("message %s: payload %v", typ, schemaRef)
			}
			re := regexp.QuoteMeta(addr)
			re = strings.ReplaceAll(re, `\{prefix\}`, `orders`)
			re = strings.ReplaceAll(re, `\{orderId\}`, `[1-9][0-9]*`)
			re = strings.ReplaceAll(re, `\{from\}`, `(?:none|-?[0-9]+(?:_[0-9]+)?)`)
			re = strings.ReplaceAll(re, `\{to\}`, `(?:none|-?[0-9]+(?:_[0-9]+)?)`)
			address[typ] = regexp.MustCompile("^" + re + "$")
			received := false
			for _, o := range operations {
				op := o.(map[string]any)
				if op["action"] == "receive" && op["channel"].(map[string]any)["$ref"] == "#/channels/"+name {
					received = true
				}
			}
			if !received {
				t.Errorf("no receive operation on channel %s", name)
			}
		}
	}
	for _, typ := range Types {
		if address[typ] == nil {
			t.Errorf("no channel for %s", typ)
		}
	}
	for _, o := range fixtureOrders(t) {
		for _, ev := range decideAll(o) {
			subj := ev.Subject("orders")
			if re := address[string(ev.Type)]; re != nil && !re.MatchString(subj) {
				t.Errorf("subject %s of %s does not match its channel address %s", subj, ev.Type, re)
			}
		}
	}
}

// walkRefs calls fn with every "$ref" value in v.
func walkRefs(v any, fn func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				fn(s)
				continue
			}
			walkRefs(e, fn)
		}
	case []any:
		for _, e := range x {
			walkRefs(e, fn)
		}
	}
}

// pointer resolves a JSON pointer ("" or "/a/b") in doc.
func pointer(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok || m[tok] == nil {
			return nil, fmt.Errorf("pointer %s: no %q", ptr, tok)
		}
		cur = m[tok]
	}
	return cur, nil
}

// enrichedOrder is an entry with the relations WATCHER_WITH loads (as the
// real service renders them) and codes of every labelled kind, an unknown
// one among them.
const enrichedOrder = `{"id":2302,"referrerId":1,"plentyId":41523,"typeId":1,"lockStatus":"unlocked","locationId":"1",` +
	`"createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"2026-11-22T10:02:41+01:00","statusId":5,"ownerId":"3",` +
	`"addresses":[{"id":11,"countryId":255},{"id":12,"countryId":0},{"id":13,"countryId":111}],` +
	`"amounts":[{"id":1,"currency":"EUR"},{"id":2,"currency":"XXX"}],` +
	`"payments":[{"id":7,"status":3,"currency":"CHF","mopId":6000}],` +
	`"orderItems":[{"id":1,"amounts":[{"currency":"gbp"}]}]}`

// TestEnrichedEventsValidate: events of every type whose entry carries
// relations validate, with labels of every kind.
func TestEnrichedEventsValidate(t *testing.T) {
	o, err := order.DecodeOrder(json.RawMessage(enrichedOrder))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[diff.Type]bool{}
	for _, ev := range decideAll(o) {
		b := diff.Encode(nil, ev, "https://shop.example/rest")
		if err := Validate(b); err != nil {
			t.Errorf("%s does not validate: %v\n%s", ev.Type, err, b)
		}
		var m struct {
			Data struct {
				Labels map[string]map[string]json.RawMessage `json:"labels"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, kind := range []string{"countries", "currencies", "paymentStatuses"} {
			if len(m.Data.Labels[kind]) == 0 {
				t.Errorf("%s: no %s labels: %s", ev.Type, kind, b)
			}
		}
		seen[ev.Type] = true
	}
	for _, typ := range Types {
		if !seen[diff.Type(typ)] {
			t.Errorf("no enriched %s event", typ)
		}
	}
}

func TestBrokenLabelsAreRejected(t *testing.T) {
	o, err := order.DecodeOrder(json.RawMessage(enrichedOrder))
	if err != nil {
		t.Fatal(err)
	}
	_, _, evs := diff.Decide(nil, o, diff.Options{})
	labels := func(m map[string]any) map[string]any { return m["data"].(map[string]any)["labels"].(map[string]any) }
	for _, tc := range []struct {
		name   string
		break_ func(m map[string]any)
		want   string
	}{
		{"empty labels", func(m map[string]any) { m["data"].(map[string]any)["labels"] = map[string]any{} }, "labels"},
		{"unknown kind", func(m map[string]any) { labels(m)["units"] = map[string]any{"1": map[string]any{"name": "Piece"}} }, "units"},
		{"country key not an id", func(m map[string]any) { labels(m)["countries"].(map[string]any)["DE"] = map[string]any{"iso": "DE"} }, "'DE' does not match"},
		{"country code in lower case", func(m map[string]any) { labels(m)["countries"].(map[string]any)["1"] = map[string]any{"iso": "de"} }, "iso"},
		{"empty country label", func(m map[string]any) { labels(m)["countries"].(map[string]any)["1"] = map[string]any{} }, "countries"},
		{"currency label without a name", func(m map[string]any) {
			labels(m)["currencies"].(map[string]any)["EUR"] = map[string]any{"code": "EUR"}
		}, "name"},
		{"payment status as a bare string", func(m map[string]any) { labels(m)["paymentStatuses"].(map[string]any)["3"] = "Captured" }, "paymentStatuses"},
		{"payment status key 0", func(m map[string]any) {
			labels(m)["paymentStatuses"].(map[string]any)["0"] = map[string]any{"name": "x"}
		}, "'0' does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			d := json.NewDecoder(bytes.NewReader(diff.Encode(nil, evs[0], "https://shop.example/rest")))
			d.UseNumber()
			if err := d.Decode(&m); err != nil {
				t.Fatal(err)
			}
			tc.break_(m)
			b, _ := json.Marshal(m)
			err := Validate(b)
			if err == nil {
				t.Fatalf("accepted:\n%s", b)
			}
			if !strings.Contains(fmt.Sprintf("%#v", err)+err.Error(), tc.want) {
				t.Errorf("error does not mention %q: %v", tc.want, err)
			}
		})
	}
}
