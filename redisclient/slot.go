package redisclient

import "strings"

// SlotKey returns the key k followed by suffix, in the same Redis Cluster
// hash slot as k, so that one script may take both: k+suffix when k has a
// hash tag of its own (its first "{...}", see [HasHashTag], keeps the slot),
// else "{k}"+suffix. A key that contains "}" without a hash tag hashes
// whole and shares its slot with no key made from it: SlotKey then returns
// k+suffix, and on Redis Cluster a script over both fails with CROSSSLOT.
func SlotKey(k, suffix string) string {
	if HasHashTag(k) || strings.ContainsRune(k, '}') {
		return k + suffix
	}
	return "{" + k + "}" + suffix
}

// HasHashTag reports whether k has a Redis Cluster hash tag: a "{"
// followed later by a "}" with at least one character between them (Redis
// Cluster then hashes only those characters).
func HasHashTag(k string) bool {
	_, after, found := strings.Cut(k, "{")
	return found && strings.IndexByte(after, '}') > 0
}
