// Package invalid holds the one "invalid argument" error of idemkit and the
// rule every package applies its functional options by, so store.ErrInvalid,
// keyer.ErrInvalid and the errors of idemclient's options are the same value
// and errors.Is matches any of them. It imports the standard library only.
package invalid

import (
	"errors"
	"fmt"
)

// Err is the sentinel that store.ErrInvalid and keyer.ErrInvalid name. Its
// text carries no package: the package that wraps it says where it failed.
var Err = errors.New("invalid argument")

// Errorf returns an error that matches Err and reads
// "invalid argument: <formatted text>".
func Errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", Err, fmt.Sprintf(format, args...))
}

// Reason returns an error that matches Err and reads as the formatted text
// alone, for a check whose caller (Apply, or a constructor wrapping Err)
// says "invalid argument" once for it.
func Reason(format string, args ...any) error {
	return &reason{msg: fmt.Sprintf(format, args...)}
}

type reason struct{ msg string }

func (r *reason) Error() string        { return r.msg }
func (r *reason) Is(target error) bool { return target == Err }

// Apply runs every option on o, in order, and returns nil or one error
// matching Err that lists every nil option and every option's error (the
// options' own texts, which name the option and say what to pass instead).
// An option's error that already matches Err is not wrapped twice.
func Apply[T any, F ~func(*T) error](o *T, opts []F) error {
	var errs []error
	for i, opt := range opts {
		if opt == nil {
			errs = append(errs, fmt.Errorf("option %d of %d is nil: drop it or pass an option", i+1, len(opts)))
			continue
		}
		if err := opt(o); err != nil {
			errs = append(errs, Strip(err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", Err, err)
	}
	return nil
}

// Strip returns err without a leading "invalid argument: " when err matches
// Err only through that prefix, so a wrapper that adds Err itself says it
// once. Other errors are returned as they are.
func Strip(err error) error {
	var s *stripped
	if errors.As(err, &s) {
		return err
	}
	msg := err.Error()
	const p = "invalid argument: "
	if len(msg) > len(p) && msg[:len(p)] == p {
		return &stripped{msg: msg[len(p):], err: err}
	}
	return err
}

type stripped struct {
	msg string
	err error
}

func (s *stripped) Error() string { return s.msg }
func (s *stripped) Unwrap() error { return s.err }
