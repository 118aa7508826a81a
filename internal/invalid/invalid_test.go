package invalid

import (
	"errors"
	"strings"
	"testing"
)

type opts struct{ n int }

func TestApply(t *testing.T) {
	set := func(n int) func(*opts) error {
		return func(o *opts) error {
			if n < 0 {
				return errors.New("set: pass 0 or more")
			}
			o.n = n
			return nil
		}
	}
	var o opts
	if err := Apply(&o, []func(*opts) error{set(1), set(2)}); err != nil || o.n != 2 {
		t.Fatalf("Apply = %v, n = %d; want nil and the last value", err, o.n)
	}
	already := func(*opts) error { return Errorf("already wrapped") }
	err := Apply(&o, []func(*opts) error{set(-1), nil, already, Reasonf()})
	if !errors.Is(err, Err) {
		t.Fatalf("Apply = %v, want Err", err)
	}
	msg := err.Error()
	for _, want := range []string{"set: pass 0 or more", "option 2 of 4 is nil", "already wrapped", "a reason"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if n := strings.Count(msg, "invalid argument"); n != 1 {
		t.Errorf("message %q says invalid argument %d times, want once", msg, n)
	}
}

func Reasonf() func(*opts) error {
	return func(*opts) error { return Reason("a reason") }
}

func TestReasonMatchesErr(t *testing.T) {
	r := Reason("x %d", 1)
	if !errors.Is(r, Err) || r.Error() != "x 1" {
		t.Errorf("Reason = %q, matches Err %v", r, errors.Is(r, Err))
	}
}
