package idem

import (
	"errors"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/keyer"
)

// WithKeyRedactor sets how the engine writes store keys into its log lines
// and into the text of the errors it returns or logs (default
// keyer.DefaultRedactor(): an HMAC with a secret drawn once per process).
// keyer.RawKeys() writes keys as they are; choose it only where logs are as
// protected as the data the keys identify. keyer.OmitKeys() writes none.
//
// The text of a store's error is redacted too (a backend may quote the key
// it failed on); errors.Is and errors.As still see the store's error.
// Tracers get the raw key (RunStart.Key, Event.Key): a tracer is the
// user's own code, and must redact what it exports itself (otelidem does).
// A nil Redactor makes New fail.
func WithKeyRedactor(r keyer.Redactor) Option {
	return func(o *options) error {
		if r == nil {
			return errors.New("WithKeyRedactor(nil): pass a keyer.Redactor, such as keyer.DefaultRedactor()")
		}
		o.redact = r
		return nil
	}
}

// show returns key as log lines and error texts may carry it.
func (e *Engine) show(key string) string { return e.opts.redact.Redact(key) }

// scrub returns err with every occurrence of key in its text, quoted (as %q
// writes it) or bare (not inside a longer word), replaced by the key's
// redacted form; it unwraps to err, so errors.Is and errors.As see through. It returns err itself when err
// is nil or the redactor leaves the key as it is.
func (e *Engine) scrub(key string, err error) error {
	if err == nil {
		return nil
	}
	shown := e.show(key)
	if key == "" || shown == key {
		return err
	}
	if r, ok := err.(*redactedError); ok && r.key == key {
		return err
	}
	return &redactedError{err: err, key: key, shown: shown}
}

type redactedError struct {
	err        error
	key, shown string
}

func (r *redactedError) Error() string { return redactText(r.err.Error(), r.key, r.shown) }
func (r *redactedError) Unwrap() error { return r.err }

// redactText replaces key in s, quoted first, then bare where it is not
// part of a longer word.
func redactText(s, key, shown string) string {
	if q := strconv.Quote(key); strings.Contains(s, q) {
		s = strings.ReplaceAll(s, q, strconv.Quote(shown))
	}
	var b strings.Builder
	for {
		i := strings.Index(s, key)
		if i < 0 {
			break
		}
		end := i + len(key)
		if (i > 0 && isWord(s[i-1]) && isWord(key[0])) || (end < len(s) && isWord(s[end]) && isWord(key[len(key)-1])) {
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(shown)
		s = s[end:]
	}
	b.WriteString(s)
	return b.String()
}

func isWord(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
