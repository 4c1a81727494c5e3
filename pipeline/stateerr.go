package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// StateOpenError adds what to do to an error opening the state file when
// its path cannot be used (the default, /var/lib/orderwatch/state.db, is the
// container's volume and rarely exists elsewhere). When the file exists, it
// says what the file holds: pointing WATCHER_STATE_PATH elsewhere would
// leave that behind and start a new first sync.
func StateOpenError(path string, err error) error {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) && !errors.Is(err, state.ErrNotWritable) {
		return err
	}
	if fi, statErr := os.Stat(path); statErr == nil && fi.Mode().IsRegular() {
		return fmt.Errorf("%w; %s exists and holds %s: make it writable for the watcher rather than setting WATCHER_STATE_PATH to another file, which starts over with a new first sync (orders changed since its watermark are recorded silently, not published), a new login, and leaves any events still in its outbox unpublished",
			err, path, stateFileContents(path, fi.Size()))
	}
	return fmt.Errorf("%w (set WATCHER_STATE_PATH to a file in a writable directory, e.g. WATCHER_STATE_PATH=./orderwatch-state.db outside a container; a new state file starts with a first sync)", err)
}

// stateFileContents describes what an existing state file holds, as far as
// it can be read without writing.
func stateFileContents(path string, size int64) string {
	s, err := state.Open(path, state.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if err != nil {
		return fmt.Sprintf("%d bytes (unreadable here: %v)", size, err)
	}
	defer s.Close()
	st, err := s.Stats()
	if err != nil {
		return fmt.Sprintf("%d bytes (unreadable here: %v)", size, err)
	}
	wm := "none yet"
	if !st.Watermark.IsZero() {
		wm = st.Watermark.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("this watcher's progress (watermark %s, %d orders tracked, %d events not yet published, the session)", wm, st.Orders, st.OutboxDepth)
}
