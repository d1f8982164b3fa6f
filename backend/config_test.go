package backend_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
)

func TestParseURL(t *testing.T) {
	for raw, want := range map[string]backend.Config{
		"singleredis://app:s3cret@127.0.0.1:6380/2?ttl=10s&prefix=app:&fence=true": {
			Backend: "singleredis", Addrs: []string{"127.0.0.1:6380"}, Username: "app", Password: "s3cret",
			DB: 2, TTL: backend.Duration(10 * time.Second), Prefix: "app:", Fence: true},
		"singlerediss://h:6379?client=redigo": {Backend: "singleredis", TLS: true, Addrs: []string{"h:6379"}, Client: "redigo"},
		"rediss://:pw@h:6379":                 {Backend: "singleredis", TLS: true, Addrs: []string{"h:6379"}, Password: "pw"},
		"redlock://h1:6379,h2:6379,h3:6379?ttl=10s&drift=0.01": {Backend: "redlock",
			Addrs: []string{"h1:6379", "h2:6379", "h3:6379"}, TTL: backend.Duration(10 * time.Second), Drift: 0.01},
		"legacysetnx://h:6379?prefix=lock.&unit=s": {Backend: "legacysetnx", Addrs: []string{"h:6379"}, Prefix: "lock.", Unit: "s"},
		"etcd://h1:2379,h2:2379?prefix=/locks/&ttl=10s&require=fencing,failover": {Backend: "etcd",
			Addrs: []string{"h1:2379", "h2:2379"}, Prefix: "/locks/", TTL: backend.Duration(10 * time.Second), Require: []string{"fencing", "failover"}},
		"singleredis://u:pa%2Fss@h:6379": {Backend: "singleredis", Addrs: []string{"h:6379"}, Username: "u", Password: "pa/ss"},
		"singleredis://u:pa/ss@h:6379":   {Backend: "singleredis", Addrs: []string{"h:6379"}, Username: "u", Password: "pa/ss"},
	} {
		got, err := backend.ParseURL(raw)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", raw, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ParseURL(%q) =\n%+v\nwant\n%+v", raw, got, want)
		}
	}
}

func TestParseURLErrorsNameTheProblem(t *testing.T) {
	for raw, mention := range map[string]string{
		"nosuch://h:1":                                "nosuch",
		"singleredis://h:6379?ttl=soon":               "ttl",
		"singleredis://h:6379?ttl=-1s":                "ttl",
		"singleredis://h:6379?ttl=9000h":              "ttl",
		"singleredis://h:6379?ttl=1ms":                "ttl",
		"singleredis://h:6379?colour=red":             "colour",
		"singleredis://?ttl=1s":                       "exactly one host",
		"singleredis://h:6379,g:6379":                 "exactly one host",
		"singleredis://h":                             "host:port",
		"singleredis://h:99999":                       "port",
		"singleredis://h:6379/x":                      "database",
		"redlock://a:1,b:1":                           "odd number",
		"redlock://a:1,b:1,c:1,d:1":                   "odd number",
		"redlock://a:1":                               "odd number",
		"redlock://a:1,b:1,c:1?drift=lots":            "drift",
		"redlock://a:1,b:1,c:1?drift=NaN":             "drift",
		"redlock://a:1,b:1,c:1?drift=-Inf":            "drift",
		"redlock://a:1,b:1,c:1?drift=0.5":             "drift",
		"redlock://a:1,b:1,c:1?restart_safety=true":   "max_ttl",
		"legacysetnx://h:1?unit=minutes":              "unit",
		"singleredis://h:1?unit=s":                    "unit",
		"etcd://h:1?fence=true":                       "fence",
		"etcd://?ttl=1s":                              "endpoint",
		"singleredis://h:1?require=telepathy":         "telepathy",
		"singleredis://h:1?client=jedis":              "client",
		"singleredis://h:1?fence=maybe":               "fence",
		"singleredis://h:1?ttl=1s&ttl=2s":             "ttl",
		"migrate://?legacy=singleredis%3A%2F%2Fh%3A1": "phase",
		"just-a-string":                               "scheme",
	} {
		_, err := backend.ParseURL(raw)
		if !errors.Is(err, lockswap.ErrInvalid) {
			t.Errorf("ParseURL(%q) err = %v, want ErrInvalid", raw, err)
			continue
		}
		if !strings.Contains(err.Error(), mention) {
			t.Errorf("ParseURL(%q) err = %q, want it to mention %q", raw, err, mention)
		}
	}
}

func TestPasswordNeverPrinted(t *testing.T) {
	const pw = "Tr0ub4dor"
	for _, raw := range []string{
		"singleredis://app:" + pw + "@h:6379?ttl=bad",
		"singleredis://app:" + pw + "@h:6379?colour=red",
		"singleredis://app:" + pw + "@h",
		"redlock://app:" + pw + "@a:1,b:1",
		"nosuch://app:" + pw + "@h:1",
		"singleredis://app:" + pw + "@h:6379/notadb",
		"singleredis//app:" + pw + "@h:6379",
	} {
		_, err := backend.ParseURL(raw)
		if err == nil {
			t.Fatalf("ParseURL(%q) accepted a bad URL", raw)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("error for %q contains the password: %v", raw, err)
		}
	}
	c, err := backend.ParseURL("singleredis://app:" + pw + "@h:6379?ttl=5s")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.String(); strings.Contains(s, pw) || !strings.Contains(s, "app:xxxxx@h:6379") {
		t.Errorf("String() = %q: must redact the password and keep the rest", s)
	}
}

func TestConfigJSON(t *testing.T) {
	in := `{"backend":"redlock","addrs":["a:1","b:1","c:1"],"ttl":"1.5s","drift":0.02,"restart_safety":true,"max_ttl":"30s","require":["fault-tolerant"]}`
	var c backend.Config
	if err := json.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if time.Duration(c.TTL) != 1500*time.Millisecond || time.Duration(c.MaxTTL) != 30*time.Second || !c.RestartSafety {
		t.Errorf("decoded %+v", c)
	}
	out, _ := json.Marshal(c)
	var back backend.Config
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("JSON round trip: %s -> %+v (%v)", out, back, err)
	}
	// The URL form and the struct are the same configuration.
	fromURL, err := backend.ParseURL(c.String())
	if err != nil || !reflect.DeepEqual(fromURL, c) {
		t.Errorf("ParseURL(String()) = %+v, %v; want %+v", fromURL, err, c)
	}
	bad := `{"backend":"singleredis","addrs":["h:1"],"ttl":"forever"}`
	if err := json.Unmarshal([]byte(bad), &c); !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), "forever") {
		t.Errorf("bad duration in JSON: %v", err)
	}
}

func TestMigrateURLValidated(t *testing.T) {
	enc := url.QueryEscape
	legacy, target := enc("legacysetnx://h:6379?prefix=lock.&unit=s"), enc("singleredis://h:6379?prefix=locks:")
	ok := "migrate://?phase=dual&legacy=" + legacy + "&target=" + target
	if _, err := backend.ParseURL(ok); err != nil {
		t.Fatalf("%s: %v", ok, err)
	}
	for raw, mention := range map[string]string{
		"migrate://?phase=halfway&legacy=" + legacy + "&target=" + target:                       "phase",
		"migrate://?phase=dual&target=" + target:                                                "legacy=",
		"migrate://?phase=target&legacy=" + legacy:                                              "target=",
		"migrate://?phase=dual&legacy=" + target + "&target=" + target:                          "legacysetnx",
		"migrate://?phase=dual&legacy=" + legacy + "&target=" + enc("singleredis://h:1?ttl=1s"): "ttl",
		"migrate://?phase=dual&legacy=" + legacy + "&target=" + enc("redlock://a:1,b:1"):        "odd number",
		"migrate://?phase=dual&legacy=" + enc("legacysetnx://h:6379") + "&target=" + target:     "unit=ms",
		"migrate://?phase=dual&ttl=500ms&legacy=" + legacy + "&target=" + target:                "1s",
	} {
		_, err := backend.ParseURL(raw)
		if !errors.Is(err, lockswap.ErrInvalid) || !strings.Contains(err.Error(), mention) {
			t.Errorf("%s: err = %v, want ErrInvalid mentioning %q", raw, err, mention)
		}
	}
}
