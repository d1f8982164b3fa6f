package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/lockswap/lockswap/cmd/lockswap/internal/inspect"
)

// redisTargets are the servers of a --redis flag and how to log in to
// them.
type redisTargets struct {
	addrs          []string // host:port, the port added when absent
	db             int      // the database of the URL form's path (inspect only)
	user, password string
	from           string // where the password came from, for messages; "" without one
}

// redisAuthHelp says how to give a password, for -h and for hints.
const redisAuthHelp = "--password, a URL redis://[user]:password@host:port in --redis, REDISCLI_AUTH or REDIS_PASSWORD"

// parseRedisFlag parses the entries of --redis of cmd: each host[:port] or
// a URL redis://[user[:password]@]host[:port][/db] (a path only when
// withDB; redis://password@host is a password alone, as for redis-cli). The password is, first of all, --password (flagPassword) or the
// URLs', which may not both be given; else REDISCLI_AUTH (redis-cli's);
// else REDIS_PASSWORD. The URLs must agree on user and password: one login
// serves all the servers. Errors are usage errors and never repeat an
// entry, which may hold a password.
func parseRedisFlag(cmd string, entries []string, flagPassword string, withDB bool) (redisTargets, error) {
	var t redisTargets
	urlAuth := false
	first := 0 // the number of the first URL entry, whose login the others must repeat
	for i, e := range entries {
		where := fmt.Sprintf("%s: --redis: address %d of %d", cmd, i+1, len(entries))
		if !strings.Contains(e, "://") {
			if strings.Contains(e, "@") {
				return t, usageError("%s has user information (an at sign) but is no URL: write redis://user:password@host:port (it is not repeated here: it may hold a password)", where)
			}
			t.addrs = append(t.addrs, inspect.Addr(e))
			continue
		}
		u, err := url.Parse(e)
		if err != nil {
			return t, usageError("%s is not a valid URL redis://[user:password@]host[:port] (not repeated here: it may hold a password)", where)
		}
		switch {
		case u.Scheme != "redis":
			return t, usageError("%s: scheme %q: want redis:// (TLS, rediss://, is not supported here)", where, u.Scheme)
		case u.Host == "":
			return t, usageError("%s has no host", where)
		case u.RawQuery != "" || u.Fragment != "":
			return t, usageError("%s has a query or fragment: want redis://[user:password@]host[:port][/db]", where)
		}
		if p := strings.TrimPrefix(u.Path, "/"); p != "" {
			db, err := strconv.Atoi(p)
			switch {
			case !withDB:
				return t, usageError("%s has a database in its path: %s runs on database 0", where, cmd)
			case err != nil || db < 0:
				return t, usageError("%s: the path is not a database number", where)
			case first != 0 && db != t.db:
				return t, usageError("%s names another database than address %d", where, first)
			}
			t.db = db
		}
		user, pw := "", ""
		if u.User != nil {
			var set bool
			if pw, set = u.User.Password(); set {
				user = u.User.Username()
			} else {
				// redis://secret@host: a password alone, as redis-cli
				// reads it.
				pw = u.User.Username()
			}
		}
		if first == 0 {
			first = i + 1
		} else if user != t.user || pw != t.password {
			return t, usageError("%s has other credentials than address %d: one login serves every server", where, first)
		}
		t.user, t.password = user, pw
		urlAuth = urlAuth || pw != ""
		t.addrs = append(t.addrs, inspect.Addr(u.Host))
	}
	switch {
	case urlAuth && flagPassword != "":
		return t, usageError("%s: a password both in --password and in a --redis URL: give one", cmd)
	case urlAuth:
		t.from = "the --redis URL"
	case flagPassword != "":
		t.password, t.from = flagPassword, "--password"
	case os.Getenv("REDISCLI_AUTH") != "":
		t.password, t.from = os.Getenv("REDISCLI_AUTH"), "REDISCLI_AUTH"
	case os.Getenv("REDIS_PASSWORD") != "":
		t.password, t.from = os.Getenv("REDIS_PASSWORD"), "REDIS_PASSWORD"
	}
	return t, nil
}

// authHint adds to err, an error from a server of t, what to do when the
// server refused the login: NOAUTH (it wants a password and got none) or
// WRONGPASS (user or password refused).
func authHint(err error, t redisTargets) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOAUTH"):
		return fmt.Errorf("%w (the server wants a password: give it with %s)", err, redisAuthHelp)
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"):
		from := t.from
		if from == "" {
			from = "nowhere: none was given"
		}
		return fmt.Errorf("%w (the server refused the user or password; the password came from %s)", err, from)
	}
	return err
}

// userServerFlags are the --redis, --password and --etcd flags of a command
// that can run on the user's own servers instead of servers it starts
// (compare, history).
type userServerFlags struct{ redis, password, etcd *string }

// addUserServerFlags defines them on fs; redisUse and etcdUse end the
// help of --redis and --etcd (what the command does with them).
func addUserServerFlags(fs *flag.FlagSet, redisUse, etcdUse string) userServerFlags {
	return userServerFlags{
		redis:    fs.String("redis", "", "your own Redis servers host:port[,host:port...] (or redis://[user:password@]host:port\nURLs) instead of started ones"+redisUse),
		password: fs.String("password", "", "the password of your --redis servers (a flag shows in ps: prefer REDISCLI_AUTH or\nREDIS_PASSWORD; the flag or the URLs' wins over them, then REDISCLI_AUTH over REDIS_PASSWORD)"),
		etcd:     fs.String("etcd", "", etcdUse),
	}
}

// parse returns what the flags name for cmd: the Redis servers and their
// login (no addrs when --redis is not given), and the etcd endpoints, URLs
// only with etcdURLs. Errors are usage errors that never repeat a password.
func (f userServerFlags) parse(cmd string, etcdURLs bool) (redisTargets, []string, error) {
	var t redisTargets
	if rs := splitList(*f.redis); len(rs) > 0 {
		var err error
		if t, err = parseRedisFlag(cmd, rs, *f.password, false); err != nil {
			return t, nil, err
		}
	} else if *f.password != "" {
		return t, nil, usageError("%s: --password is for your --redis servers, and none is given", cmd)
	}
	etcd := splitList(*f.etcd)
	if err := plainAddrs(cmd, "etcd", etcd, etcdURLs); err != nil {
		return t, nil, err
	}
	return t, etcd, nil
}
