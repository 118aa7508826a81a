package httpidemtest_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/httpidemtest"
	"github.com/idemkit/idemkit/internal/brokenidem"
)

// failing returns the names of the rules that failed, and the failures.
func failing(results []httpidemtest.Result) ([]string, string) {
	var names []string
	var msgs strings.Builder
	for _, r := range results {
		if r.Verdict == httpidemtest.Fail {
			names = append(names, r.Rule)
			msgs.WriteString(r.String() + "\n")
		}
	}
	return names, msgs.String()
}

// TestReferencePasses runs the suite on the unbroken middleware: every rule
// passes, answering 409 to duplicates in flight or waiting for them.
func TestReferencePasses(t *testing.T) {
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		t.Run("wait="+wait.String(), func(t *testing.T) {
			t.Parallel()
			httpidemtest.Run(t, brokenidem.NewApp(brokenidem.Options{Wait: wait}).Target())
		})
	}
}

// TestEachBreakFailsItsRule breaks the middleware one rule at a time: the
// suite fails exactly that rule, with the rule named.
func TestEachBreakFailsItsRule(t *testing.T) {
	names := make([]string, 0, len(httpidemtest.Rules()))
	for _, r := range httpidemtest.Rules() {
		names = append(names, r.Name)
	}
	for _, b := range brokenidem.Breaks {
		if !slices.Contains(names, b) {
			t.Fatalf("break %q names no rule", b)
		}
	}
	for _, r := range names {
		if !slices.Contains(brokenidem.Breaks, r) {
			t.Errorf("rule %s has no broken middleware that proves it can fail", r)
		}
	}
	for _, b := range brokenidem.Breaks {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			o := brokenidem.Options{Break: b}
			if b == "inflight/conflict-or-wait" {
				o.Wait = 300 * time.Millisecond // the wait that ends by running the handler
			}
			results, err := httpidemtest.Check(t.Context(), brokenidem.NewApp(o).Target())
			if err != nil {
				t.Fatal(err)
			}
			got, msgs := failing(results)
			if !slices.Equal(got, []string{b}) {
				t.Errorf("failed rules %v, want only [%s]:\n%s", got, b, msgs)
			}
			for _, want := range []string{"rule " + b + ": fail", "exchanges:", "POST http://127.0.0.1:", "-> "} {
				if !strings.Contains(msgs, want) {
					t.Errorf("the failure does not show %q:\n%s", want, msgs)
				}
			}
		})
	}
}
