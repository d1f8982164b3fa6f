// Package redact hides passwords in messages that repeat what a user
// typed (a malformed URL, a command's arguments): the password of a URL's
// user information, percent-encoded or not, and the value of a password=
// parameter. The library's errors for backend URLs and the command's
// messages pass through it.
package redact

import (
	"net/url"
	"strings"
)

// Hidden is what a hidden password reads as.
const Hidden = "xxxxx"

// String returns the text s with passwords replaced by Hidden, word by
// word (a word is text between spaces and quotes):
//
//   - the password of a URL's user information: after each "://" (or
//     "%3A%2F%2F", a nested URL percent-encoded), in the authority (up to
//     the next "/", "?" or "#", or their encodings), what is between the
//     first ":" (or "%3A") and the last "@" (or "%40"), or all before the
//     "@" when there is no ":". A word without "://" is taken as
//     user:password@host when it has a ":" before an "@" and no "/";
//   - the value of each password= parameter (the name matched without
//     regard to case or percent-encoding, and with leading dashes, so
//     that the flag --password=... is hidden too), up to the next "?",
//     "&" or ";".
//
// A password with a space or a quote in it is cut into words, and only
// its last part is hidden.
func String(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexFunc(s, isWordBreak)
		if i < 0 {
			i = len(s)
		}
		b.WriteString(word(s[:i]))
		if i < len(s) {
			b.WriteByte(s[i]) // the breaks are single bytes
			i++
		}
		s = s[i:]
	}
	return b.String()
}

func isWordBreak(r rune) bool {
	return r == ' ' || r == '"' || r == '\'' || r == '`' || r == '\t' || r == '\n' || r == '\r'
}

// word redacts one word.
func word(w string) string {
	return passwordParams(userinfo(w))
}

// userinfo hides the passwords of the URLs in w.
func userinfo(w string) string {
	lower := asciiLower(w) // the same length as w, so its indexes are w's
	found := false
	for from := 0; from < len(w); {
		i, n := strings.Index(lower[from:], "://"), 3
		if j := strings.Index(lower[from:], "%3a%2f%2f"); j >= 0 && (i < 0 || j < i) {
			i, n = j, 9
		}
		if i < 0 {
			break
		}
		found = true
		start := from + i + n
		end := start + authorityEnd(lower[start:], n == 9)
		w, lower = hideUser(w, lower, start, end, n == 9)
		from = start + 1
		if from > len(w) {
			break
		}
	}
	if !found && !strings.Contains(w, "/") {
		if at := strings.LastIndex(w, "@"); at >= 0 && strings.Contains(w[:at], ":") {
			w, _ = hideUser(w, lower, 0, len(w), false)
		}
	}
	return w
}

// authorityEnd returns where the authority at the start of s ends: at
// "/", "?" or "#" (encoded: their percent-encodings too).
func authorityEnd(s string, encoded bool) int {
	end := len(s)
	seps := []string{"/", "?", "#"}
	if encoded {
		seps = append(seps, "%2f", "%3f", "%23")
	}
	for _, sep := range seps {
		if k := strings.Index(s, sep); k >= 0 && k < end {
			end = k
		}
	}
	return end
}

// hideUser hides the password of the user information in w[start:end],
// if it has one, and returns w and its lower-case copy changed alike.
func hideUser(w, lower string, start, end int, encoded bool) (string, string) {
	auth := lower[start:end]
	at := strings.LastIndex(auth, "@")
	if encoded {
		if k := strings.LastIndex(auth, "%40"); k > at {
			at = k
		}
	}
	if at <= 0 {
		return w, lower
	}
	from := start
	if c := strings.Index(auth[:at], ":"); c >= 0 {
		from = start + c + 1
	} else if c := strings.Index(auth[:at], "%3a"); encoded && c >= 0 {
		from = start + c + 3
	}
	to := start + at
	if from == to {
		return w, lower
	}
	return w[:from] + Hidden + w[to:], lower[:from] + Hidden + lower[to:]
}

// asciiLower lowers A-Z only, so that the result has the length of s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// IndexFold returns the index of the first sub in s, ASCII letters
// matched without regard to case, or -1.
func IndexFold(s, sub string) int { return strings.Index(asciiLower(s), asciiLower(sub)) }

// LastIndexFold is IndexFold's last occurrence.
func LastIndexFold(s, sub string) int { return strings.LastIndex(asciiLower(s), asciiLower(sub)) }

// passwordParams hides the values of password= parameters in w.
func passwordParams(w string) string {
	var b strings.Builder
	start := 0
	for {
		end := strings.IndexAny(w[start:], "?&;")
		if end < 0 {
			end = len(w)
		} else {
			end += start
		}
		piece := w[start:end]
		if name, _, ok := strings.Cut(piece, "="); ok && isPassword(name) {
			piece = name + "=" + Hidden
		}
		b.WriteString(piece)
		if end == len(w) {
			return b.String()
		}
		b.WriteByte(w[end])
		start = end + 1
	}
}

func isPassword(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	return strings.EqualFold(strings.TrimLeft(name, "-"), "password")
}

// Error returns err with its text passed through String, still matching
// (errors.Is, errors.As) what err matches; err itself when String changes
// nothing, and nil for nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := String(msg); r != msg {
		return &redacted{msg: r, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
