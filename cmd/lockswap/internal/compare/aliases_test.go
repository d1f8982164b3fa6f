package compare

import (
	"slices"
	"testing"
)

// TestSchemeAliases: --backends and --columns take the names users know
// from URL schemes, etcd and redis, as etcdlease and singleredis; a TLS
// scheme is no backend name.
func TestSchemeAliases(t *testing.T) {
	got, err := ShorthandColumns([]string{"redis", "etcd"})
	want, _ := ShorthandColumns([]string{"singleredis", "etcdlease"})
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ShorthandColumns(redis, etcd) = %q, %v; want %q", got, err, want)
	}
	c, err := ParseColumn("redis?fence=true")
	if f, _ := ParseColumn("singleredis?fence=true"); err != nil || c.Label != f.Label || c.Backend != f.Backend {
		t.Errorf("ParseColumn(redis?fence=true) = %+v, %v; want %+v", c, err, f)
	}
	for _, name := range []string{"rediss", "etcds", "singlerediss"} {
		if _, err := ShorthandColumns([]string{name}); err == nil {
			t.Errorf("ShorthandColumns(%s): no error; a TLS scheme is no backend name here", name)
		}
	}
}
