package badinput

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockswap/lockswap"
	"github.com/lockswap/lockswap/backend"
	"github.com/lockswap/lockswap/internal/redistest"
	"github.com/lockswap/lockswap/internal/testserver"
	"github.com/lockswap/lockswap/redisclient"
	"github.com/lockswap/lockswap/redlock"
)

// secret is the password of the URLs that carry one: no error may show it.
const secret = "s3cret-pw"

// servers are the servers the bad inputs are tried on, and what the
// documents write instead of their addresses.
type servers struct {
	redis  []string // three redis-servers
	etcd   string
	raw    []*goredis.Client
	etcdc  *clientv3.Client
	expand *strings.Replacer // {r1} {r2} {r3} {etcd} into addresses
	redact *strings.Replacer // addresses into {r1} ... for the document
}

// call is one use of an opened Locker with a bad argument.
type call struct {
	what string // the kind of bad value
	code string // the call, as the document shows it
	// do makes the call; l is a lock held on the key "held", taken before
	// the servers' snapshot.
	do func(ctx context.Context, lk lockswap.Locker, l lockswap.Lock) error
}

// A key that holds a Redis hash on every redis-server: a lock call on it
// must leave it alone.
const hashKey = "bad-input:hash"

// taken is the error of an acquisition, releasing what it took (a bad
// input accepted must not leave a lock behind for the next row).
func taken(ctx context.Context, l lockswap.Lock, err error) error {
	if err == nil {
		l.Release(ctx)
	}
	return err
}

var calls = []call{
	{"empty key", `TryAcquire(ctx, "")`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.TryAcquire(ctx, "")
		return taken(ctx, l, err)
	}},
	{"nil context", `Acquire(nil, "k")`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.Acquire(nil, "k") //nolint:staticcheck // the bad input under test
		return taken(ctx, l, err)
	}},
	{"TTL zero", `TryAcquire(ctx, "k", lockswap.WithTTL(0))`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(0))
		return taken(ctx, l, err)
	}},
	{"TTL below the minimum", `TryAcquire(ctx, "k", lockswap.WithTTL(time.Millisecond))`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(time.Millisecond))
		return taken(ctx, l, err)
	}},
	{"TTL above the maximum", `TryAcquire(ctx, "k", lockswap.WithTTL(lockswap.MaxTTL+time.Hour))`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithTTL(lockswap.MaxTTL+time.Hour))
		return taken(ctx, l, err)
	}},
	{"negative max hold", `TryAcquire(ctx, "k", lockswap.WithMaxHold(-time.Second))`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.TryAcquire(ctx, "k", lockswap.WithMaxHold(-time.Second))
		return taken(ctx, l, err)
	}},
	{"Extend to a TTL of zero", `l.Extend(ctx, 0)`, func(ctx context.Context, _ lockswap.Locker, l lockswap.Lock) error {
		return l.Extend(ctx, 0)
	}},
	{"Extend above the maximum TTL", `l.Extend(ctx, lockswap.MaxTTL+time.Hour)`, func(ctx context.Context, _ lockswap.Locker, l lockswap.Lock) error {
		return l.Extend(ctx, lockswap.MaxTTL+time.Hour)
	}},
	{"a key holding another Redis type", `TryAcquire(ctx, "` + hashKey + `")`, func(ctx context.Context, lk lockswap.Locker, _ lockswap.Lock) error {
		l, err := lk.TryAcquire(ctx, hashKey)
		return taken(ctx, l, err)
	}},
}

// lockers are the Lockers the calls are tried on, one per backend, by
// URL, or by open when set.
var lockers = []struct {
	name, url string
	open      func(t *testing.T, s *servers) (lockswap.Locker, error)
}{
	{"singleredis", "singleredis://{r1}?fence=true", nil},
	{"singleredis fair_wait", "singleredis://{r1}?fair_wait=true", nil},
	// A fixed instance timeout: the messages list what each instance
	// answered, and the adaptive one (50 ms once the first answers came)
	// could miss one on a loaded machine.
	{"redlock", "", func(t *testing.T, s *servers) (lockswap.Locker, error) {
		cs := make([]redisclient.Client, len(s.redis))
		for i, a := range s.redis {
			cs[i] = redistest.GoRedis(t, a)
		}
		return redlock.New(cs, redlock.Options{Fence: true, InstanceTimeout: time.Second})
	}},
	{"legacysetnx", "legacysetnx://{r1}?unit=ms", nil},
	{"etcd", "etcd://{etcd}?prefix=bad-input/", nil},
	{"memlock", "memlock://?store=bad-input", nil},
	{"migrate", "migrate://?phase=dual&legacy=legacysetnx%3A%2F%2F{r1}%3Funit%3Dms&target=singleredis%3A%2F%2F{r1}%3Fprefix%3Dnew%3A", nil},
}

// urls are bad URLs: each is refused when parsed or opened.
var urls = []struct{ what, url string }{
	{"unknown scheme", "memcache://{r1}"},
	{"unknown parameter", "singleredis://{r1}?tll=10s"},
	{"parameter of another backend", "singleredis://{r1}?unit=ms"},
	{"parameter given twice", "singleredis://{r1}?ttl=1s&ttl=2s"},
	{"duration without a unit", "singleredis://{r1}?ttl=10"},
	{"TTL below the minimum", "singleredis://{r1}?ttl=1ms"},
	{"TTL above the maximum", "singleredis://{r1}?ttl=9000h"},
	{"not a boolean", "singleredis://{r1}?fence=yes"},
	{"unknown client library", "singleredis://{r1}?client=jedis"},
	{"password, with a mistake", "singleredis://user:" + secret + "@{r1}?tll=1s"},
	{"password, with a property missing", "singleredis://user:" + secret + "@{r1}?require=failover"},
	{"no host", "singleredis://?ttl=1s"},
	{"two hosts for one server", "singleredis://{r1},{r2}"},
	{"port out of range", "singleredis://127.0.0.1:70000"},
	{"database out of range", "singleredis://{r1}/16"},
	{"space in a host list", "redlock://{r1}, {r2}, {r3}"},
	{"empty entry in a host list", "redlock://{r1},,{r2},{r3}"},
	{"one master listed twice", "redlock://{r1},{r1},{r2}"},
	{"even number of masters", "redlock://{r1},{r2}"},
	{"restart safety without max_ttl", "redlock://{r1},{r2},{r3}?restart_safety=true"},
	{"max_ttl above the maximum", "redlock://{r1},{r2},{r3}?restart_safety=true&max_ttl=2562047h"},
	{"ttl above max_ttl", "redlock://{r1},{r2},{r3}?restart_safety=true&max_ttl=10s&ttl=20s"},
	{"too many failovers to spare", "redlock://{r1},{r2},{r3}?failovers=2"},
	{"instance timeout that leaves no validity", "redlock://{r1},{r2},{r3}?instance_timeout=1s&ttl=1s"},
	{"extensions bound of zero", "redlock://{r1},{r2},{r3}?max_extensions=0"},
	{"legacysetnx without its unit", "legacysetnx://{r1}"},
	{"TTL outside the unit's range", "legacysetnx://{r1}?unit=s&ttl=500ms"},
	{"etcd TTL below a second", "etcd://{etcd}?ttl=500ms"},
	{"etcd cluster of no members", "etcd://{etcd}?cluster_size=0"},
	{"unknown required property", "singleredis://{r1}?require=magic"},
	{"a property the backend lacks", "singleredis://{r1}?require=failover"},
	{"TLS files on a plain scheme", "singleredis://{r1}?tls_ca=/etc/ca.pem"},
	{"migrate without its phase", "migrate://?legacy=legacysetnx%3A%2F%2F{r1}%3Funit%3Dms&target=singleredis%3A%2F%2F{r1}"},
	{"migrate with a bad nested URL", "migrate://?phase=dual&legacy=legacysetnx%3A%2F%2F{r1}&target=singleredis%3A%2F%2F{r1}"},
}

// TestBadInput tries every bad input, checks what the user gets and that
// the servers are as they were, and compares the table it makes with
// docs/bad-input.md.
func TestBadInput(t *testing.T) {
	s := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var doc strings.Builder
	doc.WriteString(header)
	doc.WriteString("\n## URLs\n\nEach is refused by `backend.OpenURL`, before anything is dialled, or (a database the server lacks, which only the server knows) by the first call, before anything is written.\n\n| bad value | URL | error (matches `lockswap.ErrInvalid`) |\n|---|---|---|\n")
	for _, u := range urls {
		before := s.snapshot(t, ctx)
		lk, err := backend.OpenURL(ctx, s.expand.Replace(u.url))
		if err == nil {
			// Only the server knows (its databases setting): the first
			// call is refused.
			var l lockswap.Lock
			if l, err = lk.TryAcquire(ctx, "k"); err == nil {
				l.Release(ctx)
			}
			lk.Close()
		}
		msg := s.check(t, u.what+": "+u.url, err, before, s.snapshot(t, ctx))
		fmt.Fprintf(&doc, "| %s | `%s` | %s |\n", u.what, strings.ReplaceAll(u.url, secret, "xxxxx"), cell(msg))
	}
	doc.WriteString("\n## Calls\n\nEach is refused by the Locker of every backend (the last, a Redis type under the key, on the Redis backends); nothing is written on the servers (the hash under the key of the last row is left as it was).\n")
	for _, c := range calls {
		fmt.Fprintf(&doc, "\n### %s: `%s`\n\n| backend | error (matches `lockswap.ErrInvalid`) |\n|---|---|\n", c.what, c.code)
		for _, l := range lockers {
			if c.what == "a key holding another Redis type" && (l.name == "etcd" || l.name == "memlock") {
				continue // no Redis types there
			}
			var lk lockswap.Locker
			var err error
			if l.open != nil {
				lk, err = l.open(t, s)
			} else {
				lk, err = backend.OpenURL(ctx, s.expand.Replace(l.url))
			}
			if err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
			t.Cleanup(func() { lk.Close() })
			held, err := lk.TryAcquire(ctx, "held")
			if err != nil {
				t.Fatalf("%s: %v", l.name, err)
			}
			before := s.snapshot(t, ctx)
			err = c.do(ctx, lk, held)
			after := s.snapshot(t, ctx)
			if rerr := held.Release(ctx); rerr != nil {
				t.Fatalf("%s: releasing the lock the calls were tried with: %v", l.name, rerr)
			}
			lk.Close()
			msg := s.check(t, c.what+" on "+l.name, err, before, after)
			fmt.Fprintf(&doc, "| %s | %s |\n", l.name, cell(msg))
		}
	}
	compareDoc(t, doc.String())
}

const header = `# Bad input

What each kind of bad input gets, on every backend. Every error matches
` + "`lockswap.ErrInvalid`" + ` (what no retry can fix), names what is wrong, never shows a
password, and comes before anything is written: the servers are as they
were. The tables are written by the test that checks all this
(` + "`internal/badinput`" + `); regenerate them with

` + "```sh\nLOCKSWAP_UPDATE_DOCS=1 go test ./internal/badinput/\n```" + `

` + "`{r1}`, `{r2}`, `{r3}`" + ` stand for three redis-servers' ` + "`host:port`" + `, ` + "`{etcd}`" + ` for an
etcd endpoint. What a retry can fix (a server down, a deadline too short
for the attempt) is ` + "`lockswap.ErrUnavailable`" + `, never ` + "`ErrInvalid`" + `: see
[errors.md](errors.md).
`

// cell is msg as a table cell: code (with two backticks around a message
// that holds one), with the table's bars escaped.
func cell(msg string) string {
	msg = strings.ReplaceAll(msg, "|", `\|`)
	if strings.Contains(msg, "`") {
		return "`` " + msg + " ``"
	}
	return "`" + msg + "`"
}

// check fails the test unless err is a clear refusal of bad input that
// changed nothing, and returns its message as the document shows it.
func (s *servers) check(t *testing.T, what string, err error, before, after string) string {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted, want ErrInvalid", what)
		return "(accepted)"
	}
	if !errors.Is(err, lockswap.ErrInvalid) {
		t.Errorf("%s: %v, want ErrInvalid", what, err)
	}
	for _, other := range []error{lockswap.ErrHeld, lockswap.ErrUnavailable, lockswap.ErrLost, lockswap.ErrClosed} {
		if errors.Is(err, other) {
			t.Errorf("%s: %v matches %v too", what, err, other)
		}
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("%s: the error shows the password: %v", what, err)
	}
	if after != before {
		t.Errorf("%s: the servers changed:\nbefore %s\nafter  %s", what, before, after)
	}
	return s.redact.Replace(err.Error())
}

// snapshot describes every key of the servers with its type and value.
func (s *servers) snapshot(t *testing.T, ctx context.Context) string {
	t.Helper()
	var out []string
	for i, r := range s.raw {
		keys, err := r.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			v, _ := r.Dump(ctx, k).Result()
			out = append(out, fmt.Sprintf("r%d %q=%q", i+1, k, v))
		}
	}
	resp, err := s.etcdc.Get(ctx, "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		out = append(out, fmt.Sprintf("etcd %q=%q", kv.Key, kv.Value))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func start(t *testing.T) *servers {
	s := &servers{}
	var expand, redact []string
	for i := range 3 {
		r := testserver.RedisT(t, testserver.RedisOptions{})
		s.redis = append(s.redis, r.Addr())
		s.raw = append(s.raw, redistest.GoRedisClient(t, r.Addr()))
		name := fmt.Sprintf("{r%d}", i+1)
		expand = append(expand, name, r.Addr())
		redact = append(redact, r.Addr(), name)
	}
	e := testserver.EtcdT(t)
	s.etcd = strings.TrimPrefix(e.Endpoints()[0], "http://")
	expand = append(expand, "{etcd}", s.etcd)
	redact = append(redact, s.etcd, "{etcd}")
	s.expand, s.redact = strings.NewReplacer(expand...), strings.NewReplacer(redact...)
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s.etcdc = c
	ctx := context.Background()
	for _, r := range s.raw {
		if err := r.HSet(ctx, hashKey, "field", "someone else's data").Err(); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// compareDoc fails the test when docs/bad-input.md is not got, or writes
// it with LOCKSWAP_UPDATE_DOCS=1.
func compareDoc(t *testing.T, got string) {
	path := filepath.Join("..", "..", "docs", "bad-input.md")
	if os.Getenv("LOCKSWAP_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("docs/bad-input.md differs from what the bad inputs got; regenerate it with LOCKSWAP_UPDATE_DOCS=1 go test ./internal/badinput/ and read the diff:\n%s", got)
	}
}
