package redact_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lockswap/lockswap/internal/redact"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"singleredis?fence=true", "singleredis?fence=true"},
		{"singleredis?password=hunter2&fence=true", "singleredis?password=xxxxx&fence=true"},
		{"redlock?fence=true&PassWord=hunter2", "redlock?fence=true&PassWord=xxxxx"},
		{"x?pass%77ord=hunter2;a=b", "x?pass%77ord=xxxxx;a=b"},
		{"password=hunter2", "password=xxxxx"},
		{"redis://user:hunter2@127.0.0.1:6379/0", "redis://user:xxxxx@127.0.0.1:6379/0"},
		{"redis://:hunter2@h:1", "redis://:xxxxx@h:1"},
		{"redis://hunter2@h:1", "redis://xxxxx@h:1"},
		{"singleredis://user:xxxxx@h:1", "singleredis://user:xxxxx@h:1"},
		{"user:hunter2@127.0.0.1", "user:xxxxx@127.0.0.1"},
		{"http://h:1/a?password=p@q&x=1", "http://h:1/a?password=xxxxx&x=1"},
		{`compare: column "singleredis?password=hunter2": no`, `compare: column "singleredis?password=xxxxx": no`},
		{`dial "u:hunter2@h:1" failed: x@y`, `dial "u:xxxxx@h:1" failed: x@y`},
		{"unexpected argument 'a b?password=c d'", "unexpected argument 'a b?password=xxxxx d'"},
		{`invalid value "---password=hunter2" for flag -limit`, `invalid value "---password=xxxxx" for flag -limit`},
		{"x legacy=%3A%2F%2Fapp%3Ahunter2%40h%3A1&y=1 z", "x legacy=%3A%2F%2Fapp%3Axxxxx%40h%3A1&y=1 z"},
		{`phase="dual=://app:hunter2@"`, `phase="dual=://app:xxxxx@"`},
		{"open singleredis://h:1?tls_ca=/etc/a@corp/ca.pem: no such file", "open singleredis://h:1?tls_ca=/etc/a@corp/ca.pem: no such file"},
		{"etcd://h:1/v2@x/ prefix", "etcd://h:1/v2@x/ prefix"},
		{"user information (an @); give host:port", "user information (an @); give host:port"},
		{"redlock://h1:1,ȺȺȺȺ%40h,h3:1", "redlock://h1:1,\u023a\u023a\u023a\u023a%40h,h3:1"},
		{"redlock://h1:1,KKKsecretpw@h:1,h3:1", "redlock://h1:xxxxx@h:1,h3:1"},
		{"x%3A%2F%2FKKuser%3Asecretpw%40h", "x%3A%2F%2FKKuser%3Axxxxx%40h"},
		{"a://ÿÿu:pw@h", "a://ÿÿu:xxxxx@h"},
		{"", ""},
		{"a&", "a&"},
		{"  two  spaces ", "  two  spaces "},
	} {
		if got := redact.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestError(t *testing.T) {
	base := errors.New("base")
	err := fmt.Errorf("open redis://u:hunter2@h:1: %w", base)
	r := redact.Error(err)
	if r.Error() != "open redis://u:xxxxx@h:1: base" || !errors.Is(r, base) {
		t.Errorf("Error(%v) = %v (errors.Is base: %v)", err, r, errors.Is(r, base))
	}
	if plain := errors.New("nothing to hide"); redact.Error(plain) != plain {
		t.Error("Error changed an error with nothing to hide")
	}
	if redact.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
}
