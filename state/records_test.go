package state

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

type testRecord struct {
	Level float64   `json:"level"`
	At    time.Time `json:"at"`
}

func TestRecordsSurviveReopen(t *testing.T) {
	path := tempPath(t)
	s := openT(t, path, Options{})
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if err := s.SaveRecord("budget", testRecord{Level: 12.5, At: at}); err != nil {
		t.Fatal(err)
	}
	wm := at.Add(-time.Minute)
	if err := s.Commit(Commit{Watermark: &wm, Records: []Record{{Name: "clock", Value: testRecord{Level: 1, At: at}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, path, Options{})
	var got testRecord
	if found, err := s.LoadRecord("budget", &got); err != nil || !found || got.Level != 12.5 || !got.At.Equal(at) {
		t.Errorf("budget = %+v, %v, %v", got, found, err)
	}
	if found, err := s.LoadRecord("clock", &got); err != nil || !found || got.Level != 1 {
		t.Errorf("clock = %+v, %v, %v", got, found, err)
	}
	if found, err := s.LoadRecord("none", &got); err != nil || found {
		t.Errorf("none: found %v, %v", found, err)
	}
	all, err := s.Records()
	if err != nil || len(all) != 2 || !strings.Contains(string(all["budget"]), `"level":12.5`) {
		t.Errorf("Records = %q, %v", all, err)
	}
	if err := s.SaveRecord("budget", nil); err != nil {
		t.Fatal(err)
	}
	if found, _ := s.LoadRecord("budget", &got); found {
		t.Error("budget still there after deleting it")
	}
	// A record of another shape is an error naming it, never a panic.
	if err := s.SaveRecord("clock", "text"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadRecord("clock", &got); err == nil || !strings.Contains(err.Error(), `"clock"`) {
		t.Errorf("mismatched record: %v", err)
	}
}

func TestMigrationFromV1AddsRecordsAndQuarantine(t *testing.T) {
	path := tempPath(t)
	writeBolt(t, path, func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyMagic, []byte(magic)); err != nil {
			return err
		}
		if err := meta.Put(keySchema, binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			return err
		}
		for _, name := range [][]byte{bucketOrders, bucketOutbox} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	s := openT(t, path, Options{})
	if m, err := s.Meta(); err != nil || m.SchemaVersion != SchemaVersion {
		t.Fatalf("after migration: %+v, %v", m, err)
	}
	if err := s.SaveRecord("x", 1); err != nil {
		t.Errorf("record after migration: %v", err)
	}
}
