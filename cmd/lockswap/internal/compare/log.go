package compare

import (
	"context"
	"log/slog"
)

// onlyMessages returns a handler that passes on to h only the records
// whose message is one of msgs and drops the rest.
func onlyMessages(h slog.Handler, msgs ...string) slog.Handler {
	return messageFilter{h: h, msgs: msgs}
}

type messageFilter struct {
	h    slog.Handler
	msgs []string
}

func (f messageFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return f.h.Enabled(ctx, l)
}

func (f messageFilter) Handle(ctx context.Context, r slog.Record) error {
	if !contains(f.msgs, r.Message) {
		return nil
	}
	return f.h.Handle(ctx, r)
}

func (f messageFilter) WithAttrs(as []slog.Attr) slog.Handler {
	return messageFilter{h: f.h.WithAttrs(as), msgs: f.msgs}
}

func (f messageFilter) WithGroup(name string) slog.Handler {
	return messageFilter{h: f.h.WithGroup(name), msgs: f.msgs}
}
