package main

import (
	"io"
	"log/slog"

	"github.com/orderwatch/orderwatch/pipeline"
)

// newLogger builds the process logger: JSON by default, text for humans.
func newLogger(w io.Writer, format, level string) *slog.Logger {
	l, _ := pipeline.ParseLevel(level)
	opts := &slog.HandlerOptions{Level: l}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
