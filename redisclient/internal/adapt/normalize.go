package adapt

import (
	"fmt"
	"slices"
)

// Normalize returns a reply as [redisclient.Client.Do] gives it whatever
// the protocol and client library: RESP3's booleans as 1 and nil, and its
// maps (CONFIG GET, HELLO, ...) as arrays of key, value pairs sorted by
// key, as RESP2 gives them, in arrays too. An error inside the reply (an
// element of an array, as rueidis gives them) becomes errReply(err).
func Normalize(v any, errReply func(error) any) any {
	switch x := v.(type) {
	case bool:
		if x {
			return int64(1)
		}
		return nil
	case []any:
		for i, e := range x {
			x[i] = Normalize(e, errReply)
		}
	case map[string]any:
		return pairs(x, errReply)
	case map[any]any:
		byKey := make(map[string]any, len(x))
		for k, e := range x {
			byKey[fmt.Sprint(k)] = e
		}
		return pairs(byKey, errReply)
	case error:
		if errReply != nil {
			return errReply(x)
		}
	}
	return v
}

// pairs is m as key, value pairs sorted by key, the values normalised.
func pairs(m map[string]any, errReply func(error) any) []any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		out = append(out, k, Normalize(m[k], errReply))
	}
	return out
}
