package mcpserve

import (
	"context"
	"log/slog"
	"strings"
)

// sdkLogger is the MCP SDK's logger: log, but only warnings and errors unless dsh logs
// at debug level — the SDK reports every session and notification at info. What the
// SDK warns about that is no fault is demoted to debug: a notification (tools/list_changed
// at a reload) for a session that keeps no GET stream open is "undelivered", for every
// such session at every reload.
func sdkLogger(log *slog.Logger) *slog.Logger {
	min := slog.LevelWarn
	if log.Enabled(context.Background(), slog.LevelDebug) {
		min = slog.LevelDebug
	}
	return slog.New(sdkHandler{log.Handler(), min})
}

// sdkHandler is a slog.Handler that demotes the SDK's routine warnings and drops
// records below min.
type sdkHandler struct {
	slog.Handler
	min slog.Level
}

func (h sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, "undelivered message") {
		r.Level = slog.LevelDebug
	}
	if r.Level < h.min || !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h sdkHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sdkHandler{h.Handler.WithAttrs(attrs), h.min}
}

func (h sdkHandler) WithGroup(name string) slog.Handler {
	return sdkHandler{h.Handler.WithGroup(name), h.min}
}
