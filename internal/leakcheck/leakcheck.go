// Package leakcheck fails a test binary whose tests leave goroutines running.
//
// Use it from a package's TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// After all tests pass it waits up to five seconds for goroutines other than
// the runtime's and the test runner's to finish, and if some never do, prints
// their stacks and exits non-zero. It is the module's small stand-in for
// go.uber.org/goleak, written to avoid a dependency.
package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Main runs the tests, then the leak check when they passed, and exits.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := Wait(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running after the tests:\n\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// Wait polls until no unexpected goroutine is left or timeout passes, and
// returns the stacks of those left ("" when none).
func Wait(timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for delay := time.Millisecond; ; delay *= 2 {
		leaked := Leaked()
		if leaked == "" || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(min(delay, 100*time.Millisecond))
	}
}

// ignored names functions whose goroutines belong to the runtime or the test
// runner and live as long as the process.
var ignored = []string{
	"testing.(*M).",
	"testing.tRunner",
	"testing.runFuzzing",
	"testing.(*T).Run",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime.goexit0",
	"runtime/trace.Start",
	"internal/runtime/",
	"runtime.gc",
	"runtime.bgsweep",
	"runtime.bgscavenge",
	"runtime.forcegchelper",
	"runtime.runfinq",
	"runtime.runCleanups",
}

// Leaked returns the stacks of goroutines other than the caller's that are not
// the runtime's or the test runner's ("" when there are none).
func Leaked() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || g == "" { // the first is the caller's own goroutine
			continue
		}
		if !isIgnored(g) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func isIgnored(stack string) bool {
	lines := strings.Split(stack, "\n")
	if len(lines) < 2 {
		return true
	}
	top := lines[1] // lines[0] is "goroutine N [state]:"
	for _, name := range ignored {
		if strings.Contains(top, name) {
			return true
		}
	}
	// A goroutine the runtime started for itself has no "created by" of ours.
	return strings.Contains(stack, "created by runtime.") && !strings.Contains(stack, "created by runtime.main")
}
