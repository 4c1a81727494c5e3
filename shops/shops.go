// Package shops is the registry of a fleet's shops: the file
// WATCHER_SHOPS_FILE (JSON, see File) parsed and validated entry by entry,
// and a Watcher that applies it live: it reads the file every second and
// reports which shops were added, changed or removed.
//
// Credentials are references only: an entry names a file (a mounted
// Secret) or an environment variable holding the password, never the
// password itself; the registry reads the secret to check that it is
// there and to notice a rotation (it keeps a hash), and hands it out only
// through Shop.Password. No Shop value holds a secret, so logging one or
// storing one (in NATS, in a report) never leaks it.
//
// An invalid entry is reported with its position and id and left out; a
// shop whose entry turns invalid keeps running with its last valid entry;
// a file that cannot be read or parsed as a whole changes nothing. So a
// typo in one entry never stops the others.
package shops

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/orderwatch/orderwatch/shopid"
)

// File is the registry file's shape:
//
//	{"shops": [
//	  {"id": "berlin", "url": "https://berlin.example", "username": "api",
//	   "passwordFile": "/etc/orderwatch/shops/berlin", "scope": "orderTypeId=1",
//	   "callShare": 0.25, "subjectPrefix": "orders.berlin", "stream": "ORDERS"},
//	  {"id": "paris", "url": "https://paris.example", "username": "api",
//	   "passwordEnv": "PARIS_PASSWORD"}
//	]}
//
// Unknown fields are an error of their entry (a "password" field in clear
// above all). Empty optional fields take the fleet's defaults (the
// WATCHER_* configuration).
type File struct {
	Shops []json.RawMessage `json:"shops"`
}

// Shop is one entry of the registry.
type Shop struct {
	// ID names the shop everywhere: its lease key, its state file, its
	// metrics' shop label. Letters, digits, '-' and '_', at most 64.
	ID       string `json:"id"`
	URL      string `json:"url"`
	Username string `json:"username"`
	// PasswordFile or PasswordEnv (exactly one) names where the password
	// is: a file (its content, a trailing newline trimmed) or an
	// environment variable of the fleet's process.
	PasswordFile string `json:"passwordFile,omitempty"`
	PasswordEnv  string `json:"passwordEnv,omitempty"`
	// Scope and ScopeJSON are WATCHER_SCOPE and WATCHER_SCOPE_JSON of the
	// shop.
	Scope     string `json:"scope,omitempty"`
	ScopeJSON string `json:"scopeJSON,omitempty"`
	// CallShare is the shop's WATCHER_CALL_SHARE (0: the fleet's).
	CallShare float64 `json:"callShare,omitempty"`
	// SubjectPrefix and Stream are the shop's WATCHER_SUBJECT_PREFIX and
	// WATCHER_STREAM ("" : the fleet's).
	SubjectPrefix string `json:"subjectPrefix,omitempty"`
	Stream        string `json:"stream,omitempty"`

	// cred is a hash of the secret the reference pointed at when the
	// entry was read: a rotated secret makes the entry a change.
	cred string
}

// LogValue names the shop and its references, never a secret.
func (s Shop) LogValue() slog.Value {
	ref := "file " + s.PasswordFile
	if s.PasswordEnv != "" {
		ref = "env " + s.PasswordEnv
	}
	return slog.GroupValue(slog.String("id", s.ID), slog.String("url", s.URL), slog.String("username", s.Username), slog.String("password", ref))
}

// Equal says whether two entries are the same, the secret they point at
// included.
func (s Shop) Equal(o Shop) bool { return s == o }

// Password reads the secret the entry points at (getenv: os.Getenv when
// nil).
func (s Shop) Password(getenv func(string) string) (string, error) {
	p, err := s.password(getenv)
	if err != nil {
		return "", fmt.Errorf("shop %s: %w", s.ID, err)
	}
	return p, nil
}

func (s Shop) password(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case s.PasswordFile != "" && s.PasswordEnv != "":
		return "", errors.New("passwordFile and passwordEnv both set: name one")
	case s.PasswordFile != "":
		b, err := os.ReadFile(s.PasswordFile)
		if err != nil {
			return "", fmt.Errorf("passwordFile: %w", err)
		}
		p := strings.TrimRight(string(b), "\r\n")
		if p == "" {
			return "", fmt.Errorf("passwordFile %s is empty", s.PasswordFile)
		}
		return p, nil
	case s.PasswordEnv != "":
		p := getenv(s.PasswordEnv)
		if p == "" {
			return "", fmt.Errorf("passwordEnv %s is not set", s.PasswordEnv)
		}
		return p, nil
	}
	return "", errors.New("no password reference: set passwordFile (a mounted Secret) or passwordEnv")
}

// streamPattern: the characters of a JetStream stream name.
var streamPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// EntryError is an invalid entry: its position in the file, its id when
// it has one, and why.
type EntryError struct {
	Index int
	ID    string
	Err   error
}

func (e *EntryError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("shops[%d]: %v", e.Index, e.Err)
	}
	return fmt.Sprintf("shops[%d] (id %q): %v", e.Index, e.ID, e.Err)
}

func (e *EntryError) Unwrap() error { return e.Err }

// Parse reads a registry file's content: the valid entries sorted by id
// and an *EntryError for each invalid one. err is set when the content as
// a whole is not a registry (then nothing else is). check, when not nil,
// is the consumer's own validation of an entry (e.g. the pipeline's
// configuration built from it); getenv resolves passwordEnv [os.Getenv].
func Parse(data []byte, check func(Shop) error, getenv func(string) string) (valid []Shop, invalid []error, err error) {
	return ParseWith(data, Options{Check: check, Getenv: getenv})
}

// ParseWith is Parse with the rules of opt: Check, Getenv, and, when
// Subjects is set, no two entries whose subjects overlap (see overlaps).
func ParseWith(data []byte, opt Options) (valid []Shop, invalid []error, err error) {
	check, getenv := opt.Check, opt.Getenv
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, nil, fmt.Errorf("registry: want {\"shops\": [...]}: %w", err)
	}
	// Two documents concatenated (a bad merge) are not a registry: the
	// second would be dropped without a word.
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("registry: content after the registry's closing brace (at byte %d): one {\"shops\": [...]} only", dec.InputOffset())
	}
	if f.Shops == nil {
		return nil, nil, errors.New(`registry: no "shops" list (an empty fleet is written "shops": [])`)
	}
	seen := map[string]int{}
	var at []int // the valid entries' positions
	for i, raw := range f.Shops {
		s, err := parseEntry(raw, check, getenv)
		if err == nil {
			if j, dup := seen[s.ID]; dup {
				err = fmt.Errorf("id given again (first at shops[%d]); this entry is ignored", j)
			}
		}
		if err != nil {
			invalid = append(invalid, &EntryError{Index: i, ID: s.ID, Err: err})
			continue
		}
		seen[s.ID] = i
		valid = append(valid, s)
		at = append(at, i)
	}
	if opt.Subjects != nil {
		valid, invalid = refuseOverlaps(valid, at, invalid, opt)
	}
	slices.SortFunc(valid, func(a, b Shop) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortStableFunc(invalid, func(a, b error) int { return cmp.Compare(index(a), index(b)) })
	return valid, invalid, nil
}

func index(err error) int {
	var ee *EntryError
	if errors.As(err, &ee) {
		return ee.Index
	}
	return -1
}

// parseEntry decodes and validates one entry; the returned Shop carries
// at least the id when it could be read.
func parseEntry(raw json.RawMessage, check func(Shop) error, getenv func(string) string) (Shop, error) {
	var s Shop
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		var probe struct {
			ID       string          `json:"id"`
			Password json.RawMessage `json:"password"`
		}
		_ = json.Unmarshal(raw, &probe)
		s = Shop{ID: probe.ID}
		if probe.Password != nil {
			return s, errors.New(`"password" in clear is not accepted: name a passwordFile (a mounted Secret) or a passwordEnv`)
		}
		return s, err
	}
	// The shop's identity in NATS (package shopid): a path segment, a file
	// name, a NATS key and subject token and a label value at once.
	if err := shopid.Valid(s.ID); err != nil {
		return s, fmt.Errorf("id %q: %v", s.ID, err)
	}
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return s, fmt.Errorf("url %q: want http(s)://host[/base path]", s.URL)
	}
	if s.Username == "" {
		return s, errors.New("username is required")
	}
	if !(s.CallShare >= 0 && s.CallShare <= 1) {
		return s, fmt.Errorf("callShare %v: want a share in (0, 1] (or none: the fleet's)", s.CallShare)
	}
	if s.Stream != "" && !streamPattern.MatchString(s.Stream) {
		return s, fmt.Errorf("stream %q: want letters, digits, '-' and '_'", s.Stream)
	}
	p, err := s.password(getenv)
	if err != nil {
		return s, err
	}
	h := sha256.Sum256([]byte(p))
	s.cred = hex.EncodeToString(h[:8])
	if check != nil {
		if err := check(s); err != nil {
			return s, err
		}
	}
	return s, nil
}
