package publisher

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// deleter deletes acknowledged entries from the outbox in its own goroutine,
// in group commits: a transaction (an fsync) takes everything acknowledged
// since the previous one, after waiting up to deleteLinger for deleteBatch
// entries. So publishing never waits for the disk, and the number of fsyncs
// stays low at any rate (they compete with the stream's own disk writes
// when NATS runs on the same machine: BenchmarkDrain measured 0.71-0.76 of
// the raw publish rate with one transaction per fsync time, 0.88 with this).
//
// A failed delete (the state file not writable) keeps the sequences and
// tries again with the next group (at least a second later); meanwhile
// failing says so, and the drain sends nothing new and reads nothing again
// until a delete works: entries it read again would go out twice. Entries
// still not deleted at a restart are sent again and dropped by the stream
// as duplicates within its duplicate window.
type deleter struct {
	p *Publisher

	mu      sync.Mutex
	seqs    []uint64
	oldest  time.Time   // earliest publish among seqs
	failing atomic.Bool // the last delete failed

	kick chan struct{}   // cap 1: there is something to delete
	sync chan chan error // delete everything added so far, reply with the outcome
	quit chan struct{}
	done chan struct{}
}

// startDeleter starts a deleter with the entries an earlier drain could not
// delete.
func (p *Publisher) startDeleter() *deleter {
	d := &deleter{
		p:      p,
		seqs:   p.undeleted,
		oldest: p.undeletedAt,
		kick:   make(chan struct{}, 1),
		sync:   make(chan chan error),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	p.undeleted = nil
	go d.loop()
	return d
}

// add queues an acknowledged entry published at sent.
func (d *deleter) add(seq uint64, sent time.Time) {
	d.mu.Lock()
	if len(d.seqs) == 0 || sent.Before(d.oldest) {
		d.oldest = sent
	}
	d.seqs = append(d.seqs, seq)
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// flush deletes everything added so far and reports the outcome.
func (d *deleter) flush() error {
	reply := make(chan error, 1)
	d.sync <- reply
	return <-reply
}

// stop deletes what is left and ends the goroutine; what it could not
// delete goes back to the publisher for the next drain.
func (d *deleter) stop() error {
	err := d.flush()
	close(d.quit)
	<-d.done
	d.mu.Lock()
	d.p.undeleted, d.p.undeletedAt = d.seqs, d.oldest
	d.mu.Unlock()
	return err
}

func (d *deleter) loop() {
	defer close(d.done)
	var retry, linger <-chan time.Time
	for {
		var reply chan error
		select {
		case <-d.quit:
			return
		case reply = <-d.sync:
		case <-d.kick:
			if retry != nil {
				continue // after a failure, wait for the retry time
			}
			if d.pending() < deleteBatch {
				if linger == nil {
					linger = time.After(deleteLinger)
				}
				continue
			}
		case <-linger:
		case <-retry:
		}
		err := d.deleteNow()
		retry, linger = nil, nil
		if err != nil {
			d.failing.Store(true)
			d.p.failed(err)
			retry = time.After(time.Second)
		} else if d.failing.Swap(false) {
			d.p.recovered()
		}
		if reply != nil {
			reply <- err
		}
	}
}

// A delete transaction waits up to deleteLinger for deleteBatch
// acknowledged entries. Entries stay a little longer in the outbox, which
// is harmless (one resent after a crash is a duplicate); flush (before
// Flush returns and before a resend) does not wait.
const (
	deleteBatch  = 8192
	deleteLinger = 50 * time.Millisecond
)

func (d *deleter) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seqs)
}

// deleteNow deletes the queued sequences in one transaction.
func (d *deleter) deleteNow() error {
	d.mu.Lock()
	seqs, oldest := d.seqs, d.oldest
	d.seqs = nil
	d.mu.Unlock()
	if len(seqs) == 0 {
		return nil
	}
	if err := d.p.outbox.DeleteOutbox(seqs...); err != nil {
		d.mu.Lock()
		d.seqs = append(seqs, d.seqs...)
		if oldest.Before(d.oldest) || len(d.seqs) == len(seqs) {
			d.oldest = oldest
		}
		d.mu.Unlock()
		return fmt.Errorf("delete %d acknowledged entries from the outbox: %w", len(seqs), err)
	}
	d.p.noteDeleted(len(seqs), oldest)
	return nil
}
