package shops

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"
)

// Kind is what happened to a shop between two readings of the registry.
type Kind string

// Kinds of change.
const (
	Added   Kind = "added"
	Changed Kind = "changed"
	Removed Kind = "removed"
)

// Change is one shop added, changed (Old is the entry before) or removed
// (Shop is the entry it had).
type Change struct {
	Kind Kind
	Shop Shop
	Old  Shop
}

// Diff is what turns the shops before into the shops after (both sorted
// by id or not; the result is sorted by id). Pure.
func Diff(before, after []Shop) []Change {
	old := make(map[string]Shop, len(before))
	for _, s := range before {
		old[s.ID] = s
	}
	var out []Change
	for _, s := range after {
		o, ok := old[s.ID]
		switch {
		case !ok:
			out = append(out, Change{Kind: Added, Shop: s})
		case !o.Equal(s):
			out = append(out, Change{Kind: Changed, Shop: s, Old: o})
		}
		delete(old, s.ID)
	}
	for _, o := range old {
		out = append(out, Change{Kind: Removed, Shop: o})
	}
	slices.SortFunc(out, func(a, b Change) int { return cmp.Compare(a.Shop.ID, b.Shop.ID) })
	return out
}

// Update is one reading of the registry that changed something: the
// shops in force now (sorted by id), how they differ from the reading
// before, and what is wrong in the file.
type Update struct {
	Shops   []Shop
	Changes []Change
	// Invalid are the entries left out (*EntryError); a shop whose entry
	// turned invalid stays in Shops with its last valid entry.
	Invalid []error
	// FileErr says why the file could not be used at all; Shops then are
	// the ones in force before, unchanged.
	FileErr error
}

// Options configure a Watcher.
type Options struct {
	Interval time.Duration // between two readings [1s]
	// Check is the consumer's validation of an entry (Parse).
	Check  func(Shop) error
	Getenv func(string) string // [os.Getenv]
	Logger *slog.Logger
	// Subjects, when set, gives an entry's stream and subject prefix in
	// force (its own or the fleet's defaults): entries whose subjects
	// overlap are refused (ParseWith). Streams are the streams the fleet
	// creates and the prefix whose subjects each captures (<prefix>.>): an
	// entry of another stream must not publish inside them.
	Subjects func(Shop) Subjects
	Streams  map[string]string
	// MaxBytes is the largest registry file read [MaxFileBytes].
	MaxBytes int64
}

// MaxFileBytes is the default limit of a registry file's size: about
// 20,000 entries. A larger file is an error of the file (nothing read):
// it is read every second.
const MaxFileBytes = 4 << 20

// Watcher reads the registry file again every Interval and reports what
// changed. No file system notification is used: a poll of a small file
// every second costs little and sees every way a file is replaced (a
// Secret's symlink swap, an editor's rename, an in-place write).
type Watcher struct {
	path string
	opt  Options
	log  *slog.Logger

	inForce []Shop
	errText string // the errors last reported, to report a change only
	started bool
	seen    os.FileInfo            // the file as last read (nil: not read)
	secrets map[string]os.FileInfo // the password files of the shops in force, as last read
	readAt  time.Time              // when it was last read
}

// fullReadEvery is how often the file is read and parsed when its size,
// modification time and inode have not changed: a password file an entry
// names (its validity) may have changed.
const fullReadEvery = 10 * time.Second

// NewWatcher returns a watcher of the registry file at path.
func NewWatcher(path string, opt Options) *Watcher {
	if opt.Interval <= 0 {
		opt.Interval = time.Second
	}
	if opt.MaxBytes <= 0 {
		opt.MaxBytes = MaxFileBytes
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Watcher{path: path, opt: opt, log: log.With("component", "shops")}
}

// Load reads the file once: the first Update (every valid shop Added).
// It is what Run reports first.
func (w *Watcher) Load() Update {
	up, _ := w.read()
	return up
}

// Run reads the file now and then every Interval until ctx ends, calling
// apply with each reading that changed the shops in force or the errors
// (always with the first). apply runs on Run's goroutine.
func (w *Watcher) Run(ctx context.Context, apply func(Update)) {
	t := time.NewTicker(w.opt.Interval)
	defer t.Stop()
	for {
		if w.changed() {
			if up, news := w.read(); news {
				apply(up)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// changed says whether the file is to be read: a stat first (a reading of
// a thousand entries costs tens of milliseconds of CPU), a reading when
// it or a password file of a shop in force differs from the one read
// (size, modification time, the file itself: a Secret's symlink swap),
// and every fullReadEvery anyway.
func (w *Watcher) changed() bool {
	if w.seen == nil || time.Since(w.readAt) >= fullReadEvery || statChanged(w.path, w.seen) {
		return true
	}
	for path, fi := range w.secrets {
		if statChanged(path, fi) {
			return true
		}
	}
	return false
}

// statChanged says whether the file at path differs from was (or cannot
// be looked at).
func statChanged(path string, was os.FileInfo) bool {
	fi, err := os.Stat(path)
	return err != nil || was == nil || fi.Size() != was.Size() || !fi.ModTime().Equal(was.ModTime()) || !os.SameFile(fi, was)
}

// stats are the password files of shops, as they are now (nil when one
// cannot be looked at: read again).
func stats(ss []Shop) map[string]os.FileInfo {
	out := map[string]os.FileInfo{}
	for _, s := range ss {
		if s.PasswordFile != "" {
			fi, _ := os.Stat(s.PasswordFile)
			out[s.PasswordFile] = fi
		}
	}
	return out
}

// read reads and parses the file; news says whether the result differs
// from the last reading (or is the first).
func (w *Watcher) read() (Update, bool) {
	first := !w.started
	w.started = true
	// Looked at before the read: a change during it is read next time.
	w.seen, w.readAt, w.secrets = nil, time.Now(), stats(w.inForce)
	if fi, err := os.Stat(w.path); err == nil {
		w.seen = fi
	}
	data, err := readLimited(w.path, w.opt.MaxBytes)
	var valid []Shop
	var invalid []error
	if err == nil {
		valid, invalid, err = ParseWith(data, w.opt)
	}
	if err != nil {
		up := Update{Shops: w.inForce, FileErr: fmt.Errorf("shops file %s: %w", w.path, err)}
		news := w.noteErrors(up)
		if news {
			w.log.Error("the shops file cannot be used; the shops in force stay as they are", "err", up.FileErr, "shops", len(w.inForce))
		}
		return up, news || first
	}
	// A shop whose entry turned invalid keeps its last valid entry.
	now := valid
	for _, e := range invalid {
		ee, _ := e.(*EntryError)
		if ee == nil || ee.ID == "" {
			continue
		}
		if i := slices.IndexFunc(w.inForce, func(s Shop) bool { return s.ID == ee.ID }); i >= 0 &&
			!slices.ContainsFunc(now, func(s Shop) bool { return s.ID == ee.ID }) {
			now = append(now, w.inForce[i])
		}
	}
	slices.SortFunc(now, func(a, b Shop) int { return cmp.Compare(a.ID, b.ID) })
	up := Update{Shops: now, Changes: Diff(w.inForce, now), Invalid: invalid}
	for p, fi := range stats(now) {
		if _, ok := w.secrets[p]; !ok {
			w.secrets[p] = fi // a new shop's (a change between its reading and now: the next full reading)
		}
	}
	w.inForce = now
	errNews := w.noteErrors(up)
	if errNews {
		for _, e := range invalid {
			w.log.Error("invalid shop entry left out (a shop running with it keeps its last valid entry)", "err", e)
		}
	}
	for _, c := range up.Changes {
		w.log.Info("shop "+string(c.Kind), "shop", c.Shop)
	}
	return up, first || errNews || len(up.Changes) > 0
}

// noteErrors remembers the errors of up; it says whether they differ from
// the last ones.
func (w *Watcher) noteErrors(up Update) bool {
	h := sha256.New()
	if up.FileErr != nil {
		fmt.Fprintln(h, up.FileErr)
	}
	for _, e := range up.Invalid {
		fmt.Fprintln(h, e)
	}
	s := string(h.Sum(nil))
	news := s != w.errText
	w.errText = s
	return news
}

// readLimited reads a file of at most limit bytes; a larger one is an
// error naming the limit.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than the limit of %d bytes (%d KiB): split the fleet (docs/fleet.md)", limit, limit>>10)
	}
	return data, nil
}
