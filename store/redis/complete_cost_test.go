package redis_test

import (
	"bytes"
	"context"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// TestCompleteServerCost: on a Redis of its own (so that no other client's
// commands count), completing a record with a 1 MiB response costs the
// server at most half of what the least script that merely stores such an
// argument costs (one SET of ARGV[1]): a script copies every argument into
// a Lua string, so Complete keeps large responses out of Lua (WATCH, GET,
// then SET in MULTI/EXEC). The completion script that rebuilt the value by
// Lua concatenation cost about twice that script. Server time is the sum
// of INFO commandstats' usec over every command, in interleaved batches,
// the median batch of each.
func TestCompleteServerCost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server process")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("redis-server is not on PATH; CI needs it (bash .ci/run installs it)")
		}
		t.Skip("redis-server is not on PATH")
	}
	port := startRedis(t, bin, t.TempDir(), "cost")
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	s := redis.MustNew(t, c, redis.WithEvictionCheck(false))
	floor := goredis.NewScript(`redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1`)
	resp := bytes.Repeat([]byte("r"), 1<<20)
	tok := store.NewToken()

	// serverTime returns the usec the server spent in all commands since
	// the last CONFIG RESETSTAT.
	serverTime := func() float64 {
		var total float64
		for _, l := range strings.Split(c.Info(ctx, "commandstats").Val(), "\n") {
			if !strings.HasPrefix(l, "cmdstat_") || strings.HasPrefix(l, "cmdstat_config") {
				continue
			}
			for _, f := range strings.Split(strings.TrimSpace(l[strings.IndexByte(l, ':')+1:]), ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					x, err := strconv.ParseFloat(v, 64)
					if err != nil {
						t.Fatal(err)
					}
					total += x
				}
			}
		}
		return total
	}
	const batches, each = 5, 8
	var storeCost, floorCost []float64
	for b := range batches {
		keys := make([]string, each)
		for i := range keys {
			keys[i] = "k" + strconv.Itoa(b) + "-" + strconv.Itoa(i)
			_, err := s.Claim(ctx, keys[i], "fp", tok, time.Minute) // SET, not counted
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := floor.Load(ctx, c).Err(); err != nil {
			t.Fatal(err)
		}
		c.ConfigResetStat(ctx)
		for _, k := range keys {
			if err := s.Complete(ctx, k, tok, resp, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		storeCost = append(storeCost, serverTime()/each)
		c.ConfigResetStat(ctx)
		for _, k := range keys {
			if err := floor.EvalSha(ctx, c, []string{"floor-" + k}, resp, 60000).Err(); err != nil {
				t.Fatal(err)
			}
		}
		floorCost = append(floorCost, serverTime()/each)
		c.Del(ctx, keys...)
	}
	sort.Float64s(storeCost)
	sort.Float64s(floorCost)
	st, fl := storeCost[batches/2], floorCost[batches/2]
	t.Logf("server time to complete with 1 MiB: %.0f µs a call; a script's SET of the ARGV: %.0f µs (%.2f×)", st, fl, st/fl)
	if st > fl/2 {
		t.Errorf("Complete costs the server %.2f× the least script, want at most 0.5×", st/fl)
	}
}
