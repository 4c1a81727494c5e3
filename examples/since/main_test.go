package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/examples/internal/fixture"
)

// TestStartsAtTheGivenPoint: events stored before the start (a time just
// after the first batch, or the sequence of the second batch's first
// event) are not printed; the rest are, and the command ends by itself at
// the end of the stream.
func TestStartsAtTheGivenPoint(t *testing.T) {
	url, js := fixture.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last uint64
	for i := range 3 {
		last = fixture.Publish(t, js, fixture.StatusChanged(int64(10+i), "3", "5", i), true)
	}
	stream, err := js.Stream(ctx, fixture.Stream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetMsg(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	after := m.Time.Add(time.Nanosecond)
	second := fixture.Publish(t, js, fixture.StatusChanged(20, "5", "5.1", 5), true)
	fixture.Publish(t, js, fixture.Created(21, "3", 6), true)

	seqs := func(out string) []int {
		var s []int
		for _, m := range regexp.MustCompile(`(?m)^seq (\d+) `).FindAllStringSubmatch(out, -1) {
			n, _ := strconv.Atoi(m[1])
			s = append(s, n)
		}
		return s
	}
	for _, tc := range []struct {
		name string
		args []string
		want []int
		line string
	}{
		{"by time", []string{"-since", after.Format(time.RFC3339Nano)}, []int{4, 5}, "order.status_changed order 20: 5 -> 5.1"},
		{"by sequence", []string{"-seq", strconv.FormatUint(second, 10)}, []int{4, 5}, "order.created order 21: in status 3"},
		{"by duration", []string{"-since", "1h"}, []int{1, 2, 3, 4, 5}, "order.status_changed order 10: 3 -> 5"},
		{"filtered", []string{"-since", "1h", "-filter", events.DefaultPrefix.Into("5.1")}, []int{4}, "order 20"},
		{"nothing after the end", []string{"-seq", "6"}, nil, "no events"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(ctx, append([]string{"-nats", url}, tc.args...), func(string) string { return "" }, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s", code, errOut.String())
			}
			if ctx.Err() != nil {
				t.Fatal("did not end by itself")
			}
			if got := seqs(out.String()); !slices.Equal(got, tc.want) {
				t.Errorf("printed seqs %v, want %v:\n%s", got, tc.want, out.String())
			}
			if !strings.Contains(out.String(), tc.line) {
				t.Errorf("no %q in:\n%s", tc.line, out.String())
			}
		})
	}
}

func TestSinceNeedsOneStart(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, args := range [][]string{{}, {"-since", "1h", "-seq", "3"}, {"-since", "yesterday"}} {
		if _, err := parse(args, func(string) string { return "" }, now, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
	c, err := parse([]string{"-since", "90m"}, func(string) string { return "" }, now, io.Discard)
	if err != nil || !c.start.Equal(now.Add(-90*time.Minute)) {
		t.Errorf("-since 90m: %v, %v", c.start, err)
	}
}
