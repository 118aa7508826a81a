package keyer

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/internal/invalid"
)

// ErrInvalid is matched by errors.Is on the errors of keyer's options and
// constructors and of CheckToken, CanonicalMethod and CanonicalHeader. It is
// the same value as store.ErrInvalid (keyer does not import package store),
// so either name matches.
var ErrInvalid = invalid.Err

// CheckKey reports whether key is a valid client key: the one rule every
// idemkit surface applies to an Idempotency-Key, server side (Parse,
// httpidem) and client side (idemclient). A key is 1 to MaxKeyLen visible
// ASCII characters (0x21 to 0x7E: no space, tab or control character
// anywhere, so " lead" and "a b" are refused) and not "null". A quoted
// header value may carry a quote or backslash escaped; the key itself is
// what CheckKey sees. The error is a *KeyError matching ErrMalformedKey.
func CheckKey(key string) error { return checkKey(key) }

// CheckToken reports whether s is an HTTP token (RFC 9110 §5.6.2): one or
// more of the visible ASCII characters other than the delimiters
// "(),/:;<=>?@[\]{}. Method names and header field names are tokens. what
// names the value in the error ("method", "header name"), which matches
// ErrInvalid.
func CheckToken(what, s string) error {
	if s == "" {
		return invalid.Reason("empty %s: pass a token such as POST or X-Request-Id", what)
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return invalid.Reason("%s %q has %q at position %d, which is not allowed in an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", what, s, s[i], i+1)
		}
	}
	return nil
}

// CanonicalMethod validates method as a token and returns it in upper case,
// the form httpidem and idemclient both compare methods in: "post" and
// "POST" name the same method to both, so an option that lists "post"
// protects POST requests. (RFC 9110 makes method names case-sensitive, but
// every registered method is upper case and net/http's clients send them so;
// idemkit treats a lower-case spelling as the caller's intent rather than as
// a method nobody sends.) A method that is not a token is an error matching
// ErrInvalid.
func CanonicalMethod(method string) (string, error) {
	if err := CheckToken("method", method); err != nil {
		return "", err
	}
	return strings.ToUpper(method), nil
}

// CanonicalHeader validates name as a header field name (a token) and
// returns it in net/http's canonical form (http.CanonicalHeaderKey), the
// form http.Header stores it in. A name that is not a token is an error
// matching ErrInvalid.
func CanonicalHeader(name string) (string, error) {
	if err := CheckToken("header name", name); err != nil {
		return "", err
	}
	return http.CanonicalHeaderKey(name), nil
}

// CanonicalMethods applies CanonicalMethod to each method and returns the
// set of their canonical forms (empty for no method); an invalid method is
// an error naming opt, the caller's option ("WithMethods").
func CanonicalMethods(opt string, methods ...string) (map[string]bool, error) {
	set := make(map[string]bool, len(methods))
	for _, m := range methods {
		c, err := CanonicalMethod(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", opt, err)
		}
		set[c] = true
	}
	return set, nil
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
