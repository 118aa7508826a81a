// Package secrettest holds the URL shapes in which a password can reach
// store.Open, and the check that an error shows none of it, for the
// redaction tests of package store and of every backend's opener.
package secrettest

import (
	"net/url"
	"strings"
	"testing"
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
