// Package secrettest holds the URL shapes in which a password can reach
// store.Open, and the check that an error shows none of it, for the
// redaction tests of package store and of every backend's opener.
package secrettest

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// The password is made of two halves on purpose: a URL whose unescaped
// character cuts the password in two must show neither half.
const (
	A = "Sup3rS"
	B = "ecr3tPw"
	// Password is the whole password of the well-formed shapes.
	Password = A + B
)

// Shapes returns, by name, store URLs of scheme for hostport (and database
// db) that carry the password: in the user info (plain and percent-encoded),
// in password= and sslpassword=, and with an unescaped # ? / that makes the
// URL malformed or moves part of the password out of the user info. user is
// the user name to log in as.
func Shapes(scheme, user, hostport, db string) map[string]string {
	base := scheme + "://" + user
	return map[string]string{
		"user info":         base + ":" + Password + "@" + hostport + "/" + db,
		"user info escaped": base + ":" + url.PathEscape(A+"%/ #"+B) + "@" + hostport + "/" + db,
		"password=":         base + "@" + hostport + "/" + db + "?password=" + Password,
		"sslpassword=":      base + "@" + hostport + "/" + db + "?sslpassword=" + Password,
		"both":              base + ":" + Password + "@" + hostport + "/" + db + "?sslpassword=" + Password + "x",
		"unescaped #":       base + ":" + A + "#" + B + "@" + hostport + "/" + db,
		"unescaped ?":       base + ":" + A + "?" + B + "@" + hostport + "/" + db,
		"unescaped /":       base + ":" + A + "/" + B + "@" + hostport + "/" + db,
		"digits then #":     base + ":1234#" + B + "@" + hostport + "/" + db,
		"digits then /":     base + ":1234/" + B + "@" + hostport + "/" + db,
		"digits then ?":     base + ":1234?" + B + "@" + hostport + "/" + db,
		"bad escape":        base + ":" + A + "%zz" + B + "@" + hostport + "/" + db,
	}
}

// Malformed lists the shapes store.Open must refuse as ErrInvalid before
// any backend sees them.
var Malformed = []string{"unescaped #", "unescaped ?", "unescaped /", "digits then #", "digits then /", "digits then ?", "bad escape"}

// Check fails t when err is nil or its message holds either half of the
// password.
func Check(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, part := range []string{A, B} {
		if strings.Contains(msg, part) {
			t.Errorf("message shows %q: %s", part, msg)
		}
	}
}

// CheckOpen runs one subtest per shape: store.Open of the shape's URL with
// suffix appended (query parameters such as "&sslmode=disable", added with
// the right separator) must fail within timeout, and its error must show
// no part of the password. A Store that opens after all is closed and
// fails the subtest.
func CheckOpen(t *testing.T, shapes map[string]string, suffix string, timeout time.Duration) {
	t.Helper()
	for name, raw := range shapes {
		t.Run(name, func(t *testing.T) {
			if suffix != "" {
				if u, err := url.Parse(raw); err == nil && u.RawQuery != "" {
					raw += "&" + suffix
				} else {
					raw += "?" + suffix
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			s, err := store.Open(ctx, raw)
			if err == nil {
				store.Close(s)
			}
			Check(t, err)
		})
	}
}
