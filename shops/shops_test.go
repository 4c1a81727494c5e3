package shops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestParseEntries: valid entries are kept (sorted by id); each invalid
// one is reported with its position, its id and why, and the others are
// not affected by it.
func TestParseEntries(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "berlin")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	entry := func(fields string) string {
		return `{"id":"x","url":"https://x.example","username":"api","passwordEnv":"PW"` + fields + `}`
	}
	tests := []struct {
		name  string
		entry string
		want  string // "" valid, else a part of the error
	}{
		{"password file", `{"id":"berlin","url":"https://berlin.example/base","username":"api","passwordFile":"` + secret + `","scope":"orderTypeId=1","callShare":0.1,"subjectPrefix":"orders.berlin","stream":"ORDERS"}`, ""},
		{"password env", entry(""), ""},
		{"password in clear", `{"id":"x","url":"https://x.example","username":"api","password":"hunter2"}`, `"password" in clear is not accepted`},
		{"unknown field", entry(`,"scopee":"a=1"`), `unknown field "scopee"`},
		{"no reference", `{"id":"x","url":"https://x.example","username":"api"}`, "no password reference"},
		{"both references", entry(`,"passwordFile":"` + secret + `"`), "both set"},
		{"missing file", `{"id":"x","url":"https://x.example","username":"api","passwordFile":"` + dir + `/nope"}`, "no such file"},
		{"empty file", `{"id":"x","url":"https://x.example","username":"api","passwordFile":"` + empty + `"}`, "is empty"},
		{"env not set", `{"id":"x","url":"https://x.example","username":"api","passwordEnv":"UNSET"}`, "passwordEnv UNSET is not set"},
		{"bad id", `{"id":"a.b","url":"https://x.example","username":"api","passwordEnv":"PW"}`, `id "a.b"`},
		{"no id", `{"url":"https://x.example","username":"api","passwordEnv":"PW"}`, `id ""`},
		{"bad url", `{"id":"x","url":"ftp://x","username":"api","passwordEnv":"PW"}`, `url "ftp://x"`},
		{"no username", `{"id":"x","url":"https://x.example","passwordEnv":"PW"}`, "username is required"},
		{"call share", entry(`,"callShare":1.5`), "callShare 1.5"},
		{"stream", entry(`,"stream":"A.B"`), `stream "A.B"`},
		{"rejected by the check", entry(`,"scope":"bad"`), "scope rejected"},
		{"not an object", `"x"`, "cannot unmarshal"},
	}
	check := func(s Shop) error {
		if s.Scope == "bad" {
			return errors.New("scope rejected")
		}
		return nil
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := `{"shops":[{"id":"ok","url":"http://ok.example","username":"u","passwordEnv":"PW"},` + tt.entry + `]}`
			valid, invalid, err := Parse([]byte(data), check, env(map[string]string{"PW": "pw"}))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if len(invalid) != 0 || len(valid) != 2 {
					t.Fatalf("valid %d, invalid %v; want both valid", len(valid), invalid)
				}
				return
			}
			if len(valid) != 1 || valid[0].ID != "ok" {
				t.Errorf("the valid entry beside it: %+v", valid)
			}
			if len(invalid) != 1 {
				t.Fatalf("invalid %v, want one", invalid)
			}
			var ee *EntryError
			if !errors.As(invalid[0], &ee) || ee.Index != 1 || !strings.Contains(invalid[0].Error(), "shops[1]") || !strings.Contains(invalid[0].Error(), tt.want) {
				t.Errorf("error %q, want shops[1] and %q", invalid[0], tt.want)
			}
			if strings.Contains(invalid[0].Error(), "hunter2") {
				t.Errorf("the error shows the password: %s", invalid[0])
			}
		})
	}
}

func TestParseDuplicateIDKeepsTheFirst(t *testing.T) {
	data := `{"shops":[
		{"id":"b","url":"http://b1.example","username":"u","passwordEnv":"PW"},
		{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"},
		{"id":"b","url":"http://b2.example","username":"u","passwordEnv":"PW"}]}`
	valid, invalid, err := Parse([]byte(data), nil, env(map[string]string{"PW": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(valid) != 2 || valid[0].ID != "a" || valid[1].URL != "http://b1.example" {
		t.Errorf("valid %+v, want a and the first b, sorted", valid)
	}
	if len(invalid) != 1 || !strings.Contains(invalid[0].Error(), `shops[2] (id "b"): id given again (first at shops[0])`) {
		t.Errorf("invalid %v", invalid)
	}
}

func TestParseWholeFile(t *testing.T) {
	for _, data := range []string{``, `[`, `{"shops":{}}`, `{}`, `{"shop":[]}`} {
		if _, _, err := Parse([]byte(data), nil, nil); err == nil {
			t.Errorf("%q parsed as a registry", data)
		}
	}
	valid, invalid, err := Parse([]byte(`{"shops":[]}`), nil, nil)
	if err != nil || len(valid)+len(invalid) != 0 {
		t.Errorf("an empty fleet: %v %v %v", valid, invalid, err)
	}
}

func TestDiff(t *testing.T) {
	a, b, c := Shop{ID: "a", URL: "u1"}, Shop{ID: "b"}, Shop{ID: "c"}
	a2 := a
	a2.URL = "u2"
	tests := []struct {
		name          string
		before, after []Shop
		want          string
	}{
		{"none", nil, nil, ""},
		{"same", []Shop{a, b}, []Shop{b, a}, ""},
		{"added", []Shop{a}, []Shop{c, a, b}, "added b, added c"},
		{"removed", []Shop{a, b, c}, []Shop{b}, "removed a, removed c"},
		{"changed", []Shop{a, b}, []Shop{a2, b}, "changed a (u1 -> u2)"},
		{"all", []Shop{a, b}, []Shop{a2, c}, "changed a (u1 -> u2), removed b, added c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, ch := range Diff(tt.before, tt.after) {
				s := string(ch.Kind) + " " + ch.Shop.ID
				if ch.Kind == Changed {
					s += fmt.Sprintf(" (%s -> %s)", ch.Old.URL, ch.Shop.URL)
				}
				got = append(got, s)
			}
			if s := strings.Join(got, ", "); s != tt.want {
				t.Errorf("Diff = %q, want %q", s, tt.want)
			}
		})
	}
}

// TestShopLogsNoSecret: a Shop logged names its reference, not the
// password it points at.
func TestShopLogsNoSecret(t *testing.T) {
	valid, _, err := Parse([]byte(`{"shops":[{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"}]}`), nil, env(map[string]string{"PW": "hunter2"}))
	if err != nil || len(valid) != 1 {
		t.Fatal(valid, err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "shop", valid[0])
	if strings.Contains(buf.String(), "hunter2") || !strings.Contains(buf.String(), "env PW") {
		t.Errorf("logged %s", buf.String())
	}
	if p, err := valid[0].Password(env(map[string]string{"PW": "hunter2"})); p != "hunter2" || err != nil {
		t.Errorf("Password = %q, %v", p, err)
	}
}

// TestWatcherAppliesChangesLive: a running watcher reports each edit of
// the file as added, changed and removed shops; a rotated secret is a
// change; a broken entry is reported and its shop keeps its last valid
// entry; a file that does not parse changes nothing.
func TestWatcherAppliesChangesLive(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shops.json")
	secret := filepath.Join(dir, "b.pw")
	write := func(name, s string) {
		t.Helper()
		// Written aside and renamed, as a Secret's update does.
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, name); err != nil {
			t.Fatal(err)
		}
	}
	shop := func(id, extra string) string {
		return fmt.Sprintf(`{"id":%q,"url":"http://%s.example","username":"u","passwordEnv":"PW"%s}`, id, id, extra)
	}
	bShop := `{"id":"b","url":"http://b.example","username":"u","passwordFile":"` + secret + `"}`
	write(secret, "one")
	write(path, `{"shops":[`+shop("a", "")+`]}`)

	ups := make(chan Update, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := NewWatcher(path, Options{Interval: 5 * time.Millisecond, Getenv: env(map[string]string{"PW": "x"})})
	go func() { defer close(done); w.Run(ctx, func(u Update) { ups <- u }) }()
	defer func() { cancel(); <-done }()
	next := func() Update {
		t.Helper()
		select {
		case u := <-ups:
			return u
		case <-time.After(10 * time.Second):
			t.Fatal("no update within 10 s")
			return Update{}
		}
	}
	summary := func(u Update) string {
		var parts []string
		for _, c := range u.Changes {
			parts = append(parts, string(c.Kind)+" "+c.Shop.ID)
		}
		var ids []string
		for _, s := range u.Shops {
			ids = append(ids, s.ID)
		}
		return strings.Join(parts, ",") + " | " + strings.Join(ids, ",") + fmt.Sprintf(" | %d invalid", len(u.Invalid))
	}
	steps := []struct {
		name, file, secret, want string
	}{
		{"first reading", "", "", "added a | a | 0 invalid"},
		{"a shop added", `{"shops":[` + shop("a", "") + `,` + bShop + `]}`, "", "added b | a,b | 0 invalid"},
		{"a scope changed", `{"shops":[` + shop("a", `,"scope":"orderTypeId=1"`) + `,` + bShop + `]}`, "", "changed a | a,b | 0 invalid"},
		{"a secret rotated", "", "two", "changed b | a,b | 0 invalid"},
		{"an entry broken", `{"shops":[` + shop("a", `,"callShare":7`) + `,` + bShop + `,` + shop("c", "") + `]}`, "", "added c | a,b,c | 1 invalid"},
		{"a shop removed", `{"shops":[` + shop("a", `,"scope":"orderTypeId=1"`) + `,` + shop("c", "") + `]}`, "", "removed b | a,c | 0 invalid"},
		{"the file broken", `{"shops":[`, "", " | a,c | 0 invalid"},
		{"the file repaired, a shop changed", `{"shops":[` + shop("a", "") + `,` + shop("c", "") + `]}`, "", "changed a | a,c | 0 invalid"},
	}
	for i, st := range steps {
		if st.file != "" {
			write(path, st.file)
		}
		if st.secret != "" {
			write(secret, st.secret)
		}
		u := next()
		if got := summary(u); got != st.want {
			t.Fatalf("step %d (%s): %s, want %s", i, st.name, got, st.want)
		}
		if (st.name == "the file broken") != (u.FileErr != nil) {
			t.Fatalf("step %d (%s): file error %v", i, st.name, u.FileErr)
		}
		if st.name == "an entry broken" && !strings.Contains(u.Invalid[0].Error(), `shops[0] (id "a"): callShare 7`) {
			t.Errorf("entry error %v", u.Invalid[0])
		}
	}
}

// TestWatcherReadsOnlyWhatChanged: the file is looked at (stat) every
// interval but read and parsed only when it changed (or every
// fullReadEvery): a reading of a thousand entries costs tens of
// milliseconds of CPU, every second on every member.
func TestWatcherReadsOnlyWhatChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shops.json")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"shops":[{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"}]}`)
	var checks atomic.Int32
	w := NewWatcher(path, Options{Interval: 5 * time.Millisecond, Getenv: env(map[string]string{"PW": "x"}),
		Check: func(Shop) error { checks.Add(1); return nil }})
	ups := make(chan Update, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, func(u Update) { ups <- u }) }()
	defer func() { cancel(); <-done }()
	<-ups
	time.Sleep(300 * time.Millisecond) // some 60 intervals
	if n := checks.Load(); n != 1 {
		t.Errorf("an unchanged file parsed %d times in 60 intervals, want once", n)
	}
	write(`{"shops":[{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"},{"id":"bb","url":"http://b.example","username":"u","passwordEnv":"PW"}]}`)
	select {
	case u := <-ups:
		if len(u.Shops) != 2 {
			t.Errorf("after the change: %d shops", len(u.Shops))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a changed file not read within 10 s")
	}
}
