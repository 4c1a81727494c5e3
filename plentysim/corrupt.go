package plentysim

import (
	"fmt"
	"strconv"
)

// Corruption is a way one order's entry is rendered unreadable in every
// search answer (a valid page with one entry a client cannot decode), as a
// real system does when an order holds data its renderer gets wrong. The
// order itself is unchanged: its updatedAt does not move when the
// corruption starts or ends.
type Corruption string

// Corruptions of an entry.
const (
	CorruptNone   Corruption = ""       // rendered as usual
	CorruptStatus Corruption = "status" // statusId is an object: the entry is unreadable, its id is not
	CorruptID     Corruption = "id"     // the id is not a number ("broken-<id>"): nothing of the entry can be read
)

// Corrupt renders the order's entry with the corruption c from now on
// (CorruptNone: readable again). It fails for an unknown order or kind.
func (s *Server) Corrupt(id int64, c Corruption) error {
	switch c {
	case CorruptNone, CorruptStatus, CorruptID:
	default:
		return fmt.Errorf("plentysim: corruption %q: want status, id or none", c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.index[id]; !ok {
		return fmt.Errorf("order %d: %w", id, ErrNoOrder)
	}
	if c == CorruptNone {
		delete(s.corrupt, id)
		return nil
	}
	if s.corrupt == nil {
		s.corrupt = map[int64]Corruption{}
	}
	s.corrupt[id] = c
	return nil
}

// corruptionLocked is the corruption of an order's entry; the caller holds
// s.mu.
func (s *Server) corruptionLocked(id int64) Corruption { return s.corrupt[id] }

// appendCorruptID appends the unreadable id of CorruptID.
func appendCorruptID(b []byte, id int64) []byte {
	b = append(b, `"broken-`...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, '"')
}

// corruptStatus is the statusId of CorruptStatus.
const corruptStatus = `{"id":"unreadable","note":"a status object where a number belongs"}`
