// Command idemload puts the payments demo under load and checks that nothing
// was lost or charged twice.
//
// Start the demo with the store to test, then point idemload at it:
//
//	go run ./examples/payments -store sqlite &
//	go run ./cmd/idemload -url http://127.0.0.1:3000 -clients 32 -keys 2000
//
// It sends each of -keys idempotency keys once, retries a share of them
// (-retry-share) — a share of new keys twice at the same moment
// (-concurrent-share) — and then checks that the server made exactly one
// payment per distinct key and answered every retry with the original
// payment. It prints throughput, p50/p99 latency and the counts of replays,
// 409s and errors, and exits 1 if any invariant broke. It talks only to the
// URL it is given; keep that on loopback.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/idemkit/idemkit/internal/loadtest"
)

func main() {
	var cfg loadtest.Config
	flag.StringVar(&cfg.URL, "url", "http://127.0.0.1:3000", "base URL of the running payments demo")
	flag.IntVar(&cfg.Clients, "clients", 16, "concurrent clients")
	flag.IntVar(&cfg.Keys, "keys", 500, "distinct idempotency keys to pay")
	flag.Float64Var(&cfg.RetryShare, "retry-share", 0.3, "share of requests that retry an earlier key")
	flag.Float64Var(&cfg.ConcurrentShare, "concurrent-share", 0.1, "share of new keys sent twice at the same moment")
	flag.DurationVar(&cfg.Duration, "duration", time.Minute, "stop issuing new keys after this long")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := loadtest.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idemload:", err)
		os.Exit(2)
	}
	fmt.Print(rep)
	if !rep.OK() {
		os.Exit(1)
	}
}
