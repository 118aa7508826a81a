package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestFindsALeak(t *testing.T) {
	stop := make(chan struct{})
	go func() { <-stop }() // a goroutine the "test" forgot
	leaked := Wait(50 * time.Millisecond)
	close(stop)
	if !strings.Contains(leaked, "TestFindsALeak") {
		t.Fatalf("Wait did not report the running goroutine; got:\n%s", leaked)
	}
	if leaked := Wait(2 * time.Second); leaked != "" {
		t.Fatalf("the goroutine ended, but Wait still reports:\n%s", leaked)
	}
}
