package redisclient_test

import (
	"strings"
	"testing"

	"github.com/lockswap/lockswap/redisclient"
)

// TestSlotKey: the key made from k hashes to k's Redis Cluster slot, by
// the rule Redis Cluster uses: the characters between the first "{" and
// the first "}" after it when there are any, else the whole key.
func TestSlotKey(t *testing.T) {
	hashed := func(k string) string {
		if i := strings.IndexByte(k, '{'); i >= 0 {
			if j := strings.IndexByte(k[i+1:], '}'); j > 0 {
				return k[i+1 : i+1+j]
			}
		}
		return k
	}
	for k, want := range map[string]string{
		"job":        "{job}:fence",
		"{user1}:a":  "{user1}:a:fence",
		"app:{x}:y":  "app:{x}:y:fence",
		"a{b}c{d}":   "a{b}c{d}:fence",
		"open{only":  "{open{only}:fence",
		"we}ird":     "we}ird:fence", // cannot share a slot: see SlotKey
		"{}literal":  "{}literal:fence",
		"{}{tag}end": "{}{tag}end:fence",
	} {
		got := redisclient.SlotKey(k, ":fence")
		if got != want {
			t.Errorf("SlotKey(%q) = %q, want %q", k, got, want)
		}
		if shares := !strings.ContainsRune(k, '}') || redisclient.HasHashTag(k); shares && hashed(got) != hashed(k) {
			t.Errorf("SlotKey(%q) = %q hashes %q, not %q: another slot", k, got, hashed(got), hashed(k))
		}
	}
	for k, want := range map[string]bool{"{a}": true, "x{ab}y": true, "{}": false, "{}{a}": false, "}{a}": true, "a}": false, "{a": false, "": false} {
		if got := redisclient.HasHashTag(k); got != want {
			t.Errorf("HasHashTag(%q) = %v, want %v", k, got, want)
		}
	}
}
