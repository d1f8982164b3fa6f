package backend

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestFieldsCoverConfig: every scalar Config field but the connection's
// own (backend, credentials, database, TLS) is a URL parameter of the name
// of its JSON tag, so that ParseURL fills it and String renders it; and
// set reads back what query writes.
func TestFieldsCoverConfig(t *testing.T) {
	var c Config
	fields := c.fields()
	v := reflect.ValueOf(&c).Elem()
	seen := 0
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch f.Type.Kind() {
		case reflect.String, reflect.Bool, reflect.Float64, reflect.Int64:
		default:
			continue // lists, maps, sub-configurations: set and query handle them by name
		}
		switch name {
		case "backend", "username", "password", "db", "tls":
			continue
		}
		seen++
		p, ok := fields[name]
		if !ok {
			t.Errorf("field %s (json %q) is no URL parameter of Config.fields", f.Name, name)
			continue
		}
		if reflect.ValueOf(p).Pointer() != v.Field(i).Addr().Pointer() {
			t.Errorf("parameter %q does not point at field %s", name, f.Name)
		}
	}
	if seen != len(fields) {
		t.Errorf("Config.fields has %d parameters, Config %d such fields", len(fields), seen)
	}

	in := Config{TTL: Duration(3 * time.Second), MaxTTL: Duration(time.Minute), DialTimeout: Duration(time.Second),
		Prefix: "p:", Client: "redigo", Unit: "ms", Phase: "dual", Fence: true, RestartSafety: true,
		ServerTime: true, RedisExpiry: true, LegacyNet: true, Drift: 0.02, Require: []string{"fencing", "fair"},
		TLSCA: "/ca.pem", TLSCert: "/c.pem", TLSKey: "/k.pem", TLSServerName: "redis.internal"}
	var out Config
	for k, vs := range in.query(false) {
		if err := out.set(k, vs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("set(query(c)) = %+v, want %+v", out, in)
	}
}
