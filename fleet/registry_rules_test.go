package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRegistryRefusesOverlappingSubjects: two entries whose subjects
// overlap (one prefix equal to, or under, another's; the default prefix
// <WATCHER_SUBJECT_PREFIX>.<id> counts) would mix shops on one subject: a
// consumer of orders.paris.> would receive berlin's orders. The entry
// with a prefix of its own is refused naming the other (both when both
// name their own: defaults never overlap one another); an entry beside
// them is not affected.
func TestRegistryRefusesOverlappingSubjects(t *testing.T) {
	entry := func(id, fields string) string {
		return `{"id":"` + id + `","url":"https://` + id + `.example","username":"api","passwordEnv":"PW"` + fields + `}`
	}
	tests := []struct {
		name     string
		a, b     string // the overlapping entries: b is refused naming a
		aID, bID string
		both     bool // a (with a prefix of its own too) is refused naming b
	}{
		{"a prefix above the others' defaults", entry("berlin", ""), entry("paris", `,"subjectPrefix":"orders"`), "berlin", "paris", false},
		{"a prefix under another's default", entry("berlin", ""), entry("paris", `,"subjectPrefix":"orders.berlin.paris"`), "berlin", "paris", false},
		{"two equal prefixes", entry("berlin", `,"subjectPrefix":"eu.shop"`), entry("paris", `,"subjectPrefix":"eu.shop"`), "berlin", "paris", true},
		{"a prefix under another's on another stream", entry("berlin", `,"subjectPrefix":"eu","stream":"EU"`), entry("paris", `,"subjectPrefix":"eu.paris","stream":"EU2"`), "berlin", "paris", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base("nats://127.0.0.1:4222")
			b.ShopsFile = filepath.Join(t.TempDir(), "shops.json")
			b.StateDir = t.TempDir()
			data := `{"shops":[` + entry("rome", "") + "," + tt.a + "," + tt.b + `]}`
			if err := os.WriteFile(b.ShopsFile, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			reg, err := ReadRegistry(&b, func(string) string { return "pw" })
			if err != nil {
				t.Fatal(err)
			}
			want := [][2]string{{tt.bID, tt.aID}}
			valid := "berlin,rome"
			if tt.both {
				want = [][2]string{{tt.aID, tt.bID}, {tt.bID, tt.aID}}
				valid = "rome"
			}
			if ids := strings.Join(reg.IDs(), ","); ids != valid {
				t.Errorf("valid shops %v, want %s", ids, valid)
			}
			if len(reg.Invalid) != len(want) {
				t.Fatalf("invalid entries %q, want %d", reg.Invalid, len(want))
			}
			for i, pair := range want {
				msg := reg.Invalid[i].Error()
				if !strings.Contains(msg, `(id "`+pair[0]+`")`) || !strings.Contains(msg, `"`+pair[1]+`"`) || !strings.Contains(msg, "overlap") {
					t.Errorf("invalid[%d] = %q, want shop %s refused naming %s", i, msg, pair[0], pair[1])
				}
			}
		})
	}
}

// TestRegistryRefusesAStreamInsideTheFleets: an entry with a stream of its
// own whose subjects lie under the fleet's stream's (<WATCHER_SUBJECT_PREFIX>.>)
// would have its events captured by both streams (or its stream refused
// by the server): the entry is refused naming the fleet's stream.
func TestRegistryRefusesAStreamInsideTheFleets(t *testing.T) {
	b := base("nats://127.0.0.1:4222")
	b.ShopsFile = filepath.Join(t.TempDir(), "shops.json")
	b.StateDir = t.TempDir()
	data := `{"shops":[
		{"id":"rome","url":"https://rome.example","username":"api","passwordEnv":"PW"},
		{"id":"berlin","url":"https://berlin.example","username":"api","passwordEnv":"PW","subjectPrefix":"orders.eu","stream":"EU"},
		{"id":"paris","url":"https://paris.example","username":"api","passwordEnv":"PW","subjectPrefix":"paris","stream":"PARIS"}]}`
	if err := os.WriteFile(b.ShopsFile, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	reg, err := ReadRegistry(&b, func(string) string { return "pw" })
	if err != nil {
		t.Fatal(err)
	}
	if ids := reg.IDs(); strings.Join(ids, ",") != "paris,rome" {
		t.Errorf("valid shops %v, want paris and rome", ids)
	}
	if len(reg.Invalid) != 1 || !strings.Contains(reg.Invalid[0].Error(), `(id "berlin")`) || !strings.Contains(reg.Invalid[0].Error(), "orders.>") {
		t.Errorf("invalid entries %q, want berlin's, naming the fleet stream's subjects orders.>", reg.Invalid)
	}
}
