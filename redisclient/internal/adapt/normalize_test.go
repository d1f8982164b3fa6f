package adapt

import (
	"errors"
	"reflect"
	"testing"
)

// TestNormalize: RESP3 replies come out as RESP2 gives them, whichever
// map type the client library uses, nested in arrays too; an error inside
// a reply goes through errReply.
func TestNormalize(t *testing.T) {
	boom := errors.New("ERR boom")
	wrap := func(err error) any { return "wrapped: " + err.Error() }
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"true", true, int64(1)},
		{"false", false, nil},
		{"scalar", "OK", "OK"},
		{"map[string]any", map[string]any{"save": "", "appendonly": "yes"}, []any{"appendonly", "yes", "save", ""}},
		{"map[any]any", map[any]any{"b": int64(2), "a": true}, []any{"a", int64(1), "b", int64(2)}},
		{"nested", []any{map[string]any{"k": false}, []any{true}}, []any{[]any{"k", nil}, []any{int64(1)}}},
		{"error", []any{boom}, []any{"wrapped: ERR boom"}},
	} {
		if got := Normalize(tc.in, wrap); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Normalize(%#v) = %#v, want %#v", tc.name, tc.in, got, tc.want)
		}
	}
	if got := Normalize(boom, nil); got != boom {
		t.Errorf("an error without errReply: %#v, want it as it is", got)
	}
}
