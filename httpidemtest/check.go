package httpidemtest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Verdict is a rule's result.
type Verdict string

// The verdicts.
const (
	Pass Verdict = "pass"
	Fail Verdict = "fail"
	Skip Verdict = "skip" // the target does not describe what the rule needs
)

// Result is what one rule found.
type Result struct {
	// Rule is the rule's name, "group/rule" (see Rules).
	Rule    string  `json:"rule"`
	Verdict Verdict `json:"verdict"`
	// Detail says what broke (one line per violation), or why the rule
	// was skipped.
	Detail string `json:"detail,omitempty"`
	// Exchanges are the requests the rule sent and their answers.
	Exchanges []Exchange `json:"exchanges,omitempty"`
	// Requests counts the requests the rule sent, counting GETs included.
	Requests int           `json:"requests"`
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// String is the failure message: the rule, what broke, the exchanges.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule %s: %s", r.Rule, r.Verdict)
	for _, line := range strings.Split(strings.TrimSpace(r.Detail), "\n") {
		if line != "" {
			fmt.Fprintf(&b, "\n  %s", line)
		}
	}
	if r.Verdict == Fail && len(r.Exchanges) > 0 {
		b.WriteString("\n  exchanges:")
		for i, e := range r.Exchanges {
			fmt.Fprintf(&b, "\n   %d. %s", i+1, e)
		}
	}
	return b.String()
}

// RuleInfo names a rule and says what it promises a client.
type RuleInfo struct {
	Name  string `json:"name"`
	Doc   string `json:"doc"`
	Needs string `json:"needs,omitempty"` // the Target fields it needs beyond the required ones
}

// rule is one check.
type rule struct {
	RuleInfo
	// skip returns why the rule cannot run on the target, or "".
	skip func(t *target) string
	run  func(c *checker)
}

// Rules lists the rules, in the order they run.
func Rules() []RuleInfo {
	out := make([]RuleInfo, len(rules))
	for i, r := range rules {
		out[i] = r.RuleInfo
	}
	return out
}

// checker runs one rule on a target and collects its result.
type checker struct {
	ctx context.Context
	t   *target
	mu  sync.Mutex // guards res: a rule may send from several goroutines
	res Result
}

// failf records a violation of the rule.
func (c *checker) failf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Verdict = Fail
	c.res.Detail += fmt.Sprintf(format, args...) + "\n"
}

// skipf records why the rule could not be judged.
func (c *checker) skipf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res.Verdict != Fail {
		c.res.Verdict = Skip
	}
	c.res.Detail += fmt.Sprintf(format, args...) + "\n"
}

// spend takes n requests from the run's budget.
func (c *checker) spend(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.res.Requests += n
	if c.t.MaxRequests == 0 {
		return true
	}
	if c.t.budget < n {
		c.res.Verdict = Fail
		c.res.Detail += errBudget.Error() + "\n"
		return false
	}
	c.t.budget -= n
	return true
}

// send sends r to the target and records the exchange.
func (c *checker) send(r req) Exchange {
	return c.sendVia(c.t.client, c.t.base.String(), r)
}

// sendVia sends r through client to base (the target, or a proxy before it).
func (c *checker) sendVia(client *http.Client, base string, r req) Exchange {
	if !c.spend(1) {
		return Exchange{Note: r.note, Err: errBudget.Error()}
	}
	e := c.t.do(c.ctx, client, base, r)
	c.mu.Lock()
	c.res.Exchanges = append(c.res.Exchanges, e)
	c.mu.Unlock()
	return e
}

// count returns the effects so far; ok is false (and the rule failed) when
// they cannot be counted.
func (c *checker) count() (int, bool) {
	if c.t.Count == nil && !c.spend(1) {
		return 0, false
	}
	n, err := c.t.count(c.ctx)
	if err != nil {
		c.failf("cannot count effects: %v", err)
		return 0, false
	}
	return n, true
}

// Check runs every rule against tg, one after the other (each counts
// effects before and after), and returns a result for each, in the order of
// Rules. Its error is for a target it cannot use; violations are results.
// ctx bounds the run: rules not started when it ends fail. With names,
// only the rules named run.
func Check(ctx context.Context, tg Target, names ...string) ([]Result, error) {
	for _, n := range names {
		if !slices.ContainsFunc(rules, func(r rule) bool { return r.Name == n }) {
			return nil, fmt.Errorf("httpidemtest: check: no rule %q", n)
		}
	}
	t, err := prepare(tg)
	if err != nil {
		return nil, err
	}
	defer t.close()
	out := make([]Result, 0, len(rules))
	for _, r := range rules {
		if len(names) == 0 || slices.Contains(names, r.Name) {
			out = append(out, runRule(ctx, t, r))
		}
	}
	return out, nil
}

// runRule runs one rule.
func runRule(ctx context.Context, t *target, r rule) Result {
	c := &checker{ctx: ctx, t: t, res: Result{Rule: r.Name, Verdict: Pass}}
	start := time.Now()
	switch why := r.skip(t); {
	case ctx.Err() != nil:
		c.failf("not run: %v", context.Cause(ctx))
	case why != "":
		c.skipf("%s", why)
	default:
		r.run(c)
	}
	c.res.Elapsed = time.Since(start)
	return c.res
}

// Run runs every rule against tg, each in a subtest named for it
// ("keys/missing", "replay/identical", ...: see Rules). A violation fails
// its subtest with the rule, what broke and the exchanges; a rule the
// target does not describe enough for is skipped. Run fails t at once for a
// target it cannot use.
func Run(t *testing.T, tg Target) {
	t.Helper()
	tt, err := prepare(tg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tt.close)
	for _, r := range rules {
		t.Run(r.Name, func(t *testing.T) {
			res := runRule(t.Context(), tt, r)
			switch res.Verdict {
			case Fail:
				t.Error(res.String())
			case Skip:
				t.Skip(res.String())
			}
		})
	}
}

// always is the skip function of a rule that needs nothing more.
func always(*target) string { return "" }
