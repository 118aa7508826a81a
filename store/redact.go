package store

import (
	"errors"
	"net/url"
	"slices"
	"strings"
)

// redacted replaces a secret wherever it appears in a message.
const redacted = "xxxxx"

// Secrets returns the passwords a store URL carries: the password of its
// user info and the value of every query parameter whose name says it holds
// one (password, sslpassword, or any name containing "pass", "secret" or
// "token", in any case). Openers pass them to RedactError.
func Secrets(u *url.URL) []string {
	var out []string
	if u == nil {
		return nil
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		out = append(out, pw)
	}
	for name, vs := range u.Query() {
		if secretParam(name) {
			for _, v := range vs {
				if v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out
}

func secretParam(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "pass") || strings.Contains(n, "secret") || strings.Contains(n, "token") || n == "pwd"
}

// RedactURL returns u as text with every secret (see Secrets) replaced by
// "xxxxx": the user info's password and the values of password parameters.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if _, ok := c.User.Password(); ok {
		c.User = url.UserPassword(c.User.Username(), redacted)
	}
	if c.RawQuery != "" {
		q := c.Query()
		hid := false
		for name, vs := range q {
			if secretParam(name) {
				for i := range vs {
					vs[i] = redacted
				}
				hid = true
			}
		}
		if hid {
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}

// RedactError returns err with every occurrence of each secret in its
// message replaced by "xxxxx" (as written, and percent-encoded as in a URL),
// or err itself when its message holds none. The result still matches what
// err matched with errors.Is and errors.As; it does not unwrap to err, so
// no wrapper can print the unredacted chain. Every idemkit opener's errors
// pass through it (store.Open applies it to whatever a backend returns), so
// no error or log line of store.Open holds a password.
func RedactError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := redact(msg, secrets)
	if out == msg {
		return err
	}
	return &redactedError{msg: out, err: err}
}

// redact replaces every form of every secret in s, longest first so that a
// secret containing another is hidden whole.
func redact(s string, secrets []string) string {
	var forms []string
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		forms = append(forms, sec, url.QueryEscape(sec), url.PathEscape(sec), url.UserPassword("", sec).String()[1:])
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	for _, f := range slices.Compact(forms) {
		if f != "" {
			s = strings.ReplaceAll(s, f, redacted)
		}
	}
	return s
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }
