package storetest_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// brokenInspectors are memory stores whose List or Count has one defect
// each; the Inspector group must fail exactly the cases named (the correct
// one must pass every case). They run in a child process, as the broken
// stores of TestSuiteCatchesBrokenStores do.
var brokenInspectors = []struct {
	name     string
	wantFail []string
}{
	{name: "correct"},
	{name: "drops-last-page", wantFail: []string{"Pages"}},
	{name: "ignores-state", wantFail: []string{"States", "Filters"}},
	{name: "newest-first", wantFail: []string{"Pages", "States", "Filters"}},
	{name: "cursor-repeats", wantFail: []string{"Pages"}},
	{name: "ignores-prefix", wantFail: []string{"Filters"}},
	{name: "miscounts-lapsed", wantFail: []string{"Count"}},
	{name: "shows-token", wantFail: []string{"Lookup"}},
}

func TestInspectorGroupCatchesBrokenInspectors(t *testing.T) {
	for _, v := range brokenInspectors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenInspectorHelper$", "-test.v", "-test.count=1", "-test.timeout=1m")
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN_INSPECTOR="+v.name)
			out, err := cmd.CombinedOutput()
			if len(v.wantFail) == 0 {
				if err != nil {
					t.Fatalf("the Inspector group failed the correct store: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("the Inspector group passed the %q store; it must fail it\n%s", v.name, out)
			}
			const mark = "--- FAIL: TestBrokenInspectorHelper/Inspector/"
			var failed []string
			for line := range strings.Lines(string(out)) {
				if _, rest, ok := strings.Cut(line, mark); ok {
					failed = append(failed, strings.Fields(rest)[0])
				}
			}
			for _, c := range v.wantFail {
				if !slices.Contains(failed, c) {
					t.Errorf("the %q store did not fail Inspector/%s\n%s", v.name, c, out)
				}
			}
			for _, c := range failed {
				if !slices.Contains(v.wantFail, c) {
					t.Errorf("the %q store also failed Inspector/%s\n%s", v.name, c, bytes.TrimSpace(out))
				}
			}
		})
	}
}

func TestBrokenInspectorHelper(t *testing.T) {
	variant := os.Getenv("STORETEST_BROKEN_INSPECTOR")
	if variant == "" {
		t.Skip("runs only as the child process of TestInspectorGroupCatchesBrokenInspectors")
	}
	storetest.RunInspector(t, storetest.Harness{New: func(t *testing.T) storetest.Subject {
		clock := storetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		s, err := memory.New(memory.WithClock(clock.Now), memory.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Subject{Store: brokenInspector{s, variant}, Clock: clock}
	}})
}

// brokenInspector is a memory store with one defect in List, Count or Lookup.
type brokenInspector struct {
	*memory.Store
	variant string
}

func (b brokenInspector) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	switch b.variant {
	case "ignores-state":
		if o.State <= store.StateExpired {
			o.State = 0
		}
	case "ignores-prefix":
		o.Prefix = ""
	case "newest-first":
		// Reverse each page: still every key once, but not oldest first.
		p, err := b.Store.List(ctx, o)
		slices.Reverse(p.Entries)
		return p, err
	}
	p, err := b.Store.List(ctx, o)
	if err != nil {
		return p, err
	}
	switch b.variant {
	case "drops-last-page":
		if p.Next != "" {
			if next, _ := b.Store.List(ctx, store.ListOptions{State: o.State, Prefix: o.Prefix, ExpiresBefore: o.ExpiresBefore, Cursor: p.Next, Limit: o.Limit}); next.Next == "" {
				p.Next = "" // the page before the last says it is the last
			}
		}
	case "cursor-repeats":
		if p.Next != "" && len(p.Entries) > 1 {
			p.Next = store.PositionOf(p.Entries[len(p.Entries)-2]).Cursor() // the last entry comes again
		}
	}
	return p, nil
}

func (b brokenInspector) Count(ctx context.Context) (store.Counts, error) {
	c, err := b.Store.Count(ctx)
	if b.variant == "miscounts-lapsed" {
		c.InProgress += c.Lapsed // lapsed counted as in progress
		c.Lapsed = 0
	}
	return c, err
}

func (b brokenInspector) Lookup(ctx context.Context, key string) (store.Entry, error) {
	e, err := b.Store.Lookup(ctx, key)
	if b.variant == "shows-token" && err == nil {
		if r, gerr := b.Store.Get(ctx, key); gerr == nil {
			e.TokenHash = string(r.Token)
		}
	}
	return e, err
}
