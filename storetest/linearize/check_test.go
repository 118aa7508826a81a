package linearize

import (
	"strings"
	"testing"

	"github.com/idemkit/idemkit/store"
)

func claimed(tok store.Token) output {
	return output{outcome: store.Acquired, rec: rec{status: store.StatusInProgress, tok: tok, fp: "fp"}}
}

func completed(tok store.Token, resp string) rec {
	return rec{status: store.StatusCompleted, tok: tok, fp: "fp", resp: resp}
}

// Hand-made histories, each with the verdict the definition gives.
func TestLinearizable(t *testing.T) {
	cases := []struct {
		name  string
		calls []call
		want  bool
	}{
		{"sequential", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: 1, out: claimed("a")},
			{kind: completeCall, tok: "a", resp: "r", begin: 2, end: 3},
			{kind: getCall, begin: 4, end: 5, out: output{rec: completed("a", "r")}},
		}, true},
		{"two acquire one key", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: 10, out: claimed("a")},
			{kind: claimCall, fp: "fp", tok: "b", begin: 1, end: 9, out: claimed("b")},
		}, false},
		{"overlapping calls in either order", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: 10, out: claimed("a")},
			{kind: getCall, begin: 1, end: 9, out: output{notFound: true}},
		}, true},
		{"a read after the write returned sees it", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: 5, out: claimed("a")},
			{kind: getCall, begin: 6, end: 9, out: output{notFound: true}},
		}, false},
		{"a lost reply took effect", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: never},
			{kind: completeCall, tok: "a", resp: "r", begin: 2, end: 3},
		}, true},
		{"a lost reply may never take effect", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: never},
			{kind: claimCall, fp: "fp", tok: "b", begin: 2, end: 3, out: claimed("b")},
		}, true},
		{"a replay changed", []call{
			{kind: claimCall, fp: "fp", tok: "a", begin: 0, end: 1, out: claimed("a")},
			{kind: completeCall, tok: "a", resp: "r1", begin: 2, end: never},
			{kind: completeCall, tok: "a", resp: "r2", begin: 3, end: 4},
			{kind: getCall, begin: 5, end: 6, out: output{rec: completed("a", "r2")}},
			{kind: getCall, begin: 7, end: 8, out: output{rec: completed("a", "r1")}},
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, decided := linearizable(c.calls)
			if !decided || ok != c.want {
				t.Errorf("linearizable = %v (decided %v), want %v", ok, decided, c.want)
			}
		})
	}
}

// shrink keeps a history with no order, and drops what is not needed to
// show it: calls after the failure, and reads that changed nothing.
func TestShrink(t *testing.T) {
	calls := []call{
		{client: 1, kind: claimCall, fp: "fp", tok: "a", begin: 0, end: 1, out: claimed("a")},
		{client: 2, kind: getCall, begin: 2, end: 3, out: output{rec: rec{status: store.StatusInProgress, tok: "a", fp: "fp"}}},
		{client: 2, kind: claimCall, fp: "fp", tok: "b", begin: 4, end: 5, out: output{outcome: store.InProgress, rec: rec{status: store.StatusInProgress, tok: "a", fp: "fp"}}},
		{client: 3, kind: claimCall, fp: "fp", tok: "c", begin: 6, end: 7, out: claimed("c")}, // the violation
		{client: 1, kind: completeCall, tok: "a", resp: "r", begin: 8, end: 9, out: output{leaseErr: true}},
		{client: 2, kind: getCall, begin: 10, end: 11, out: output{rec: rec{status: store.StatusInProgress, tok: "c", fp: "fp"}}},
	}
	if ok, _ := linearizable(calls); ok {
		t.Fatal("the history has an order; the test needs one without")
	}
	h := shrink(calls)
	if len(h) != 2 || h[0].tok != "a" || h[1].tok != "c" {
		t.Fatalf("shrink kept %d calls %v, want the two Claims that both acquired", len(h), h)
	}
	report := describe("k", h, 1, 7, 0)
	for _, want := range []string{`Claim("k", "fp", a) = acquired {in progress token=a fingerprint="fp"}`, `Claim("k", "fp", c) = acquired`, "STORETEST_SEED=7"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
}
