package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error")
	}
	return l, nil
}

// newLogger builds the process logger: JSON by default, text for humans.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	l, _ := parseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
