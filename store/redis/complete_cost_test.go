package redis_test

import (
	"bytes"
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testredis"
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
	c := privateClient(t, "cost")
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

// privateClient returns a client of a redis-server of t's own (skipped
// where there is no redis-server, and under -short).
func privateClient(t *testing.T, name string) *goredis.Client {
	t.Helper()
	port := startRedis(t, testredis.Binary(t), t.TempDir(), name)
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	t.Cleanup(func() { c.Close() })
	return c
}

// cmdStat is one line of INFO commandstats.
type cmdStat struct {
	calls int
	usec  float64
}

// commandStats returns INFO commandstats by command name (lower case,
// without the cmdstat_ prefix), CONFIG itself left out.
func commandStats(t *testing.T, c *goredis.Client) map[string]cmdStat {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]cmdStat{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || strings.HasPrefix(name, "config") {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				st.calls, err = strconv.Atoi(v)
			case "usec":
				st.usec, err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		stats[name] = st
	}
	return stats
}

// rawComplete is the least a hand-written token-checked completion does:
// GET, compare the token, SET the value the client built (it knows the
// fingerprint) with PX. ARGV[1] is the token, ARGV[2] the value, ARGV[3]
// the retention in milliseconds.
var rawComplete = goredis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur or string.sub(cur, 14, 13 + #ARGV[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// TestSmallCompleteServerOps: on a Redis of its own, a Claim of a new key
// is one SET and the Complete of a small response one script run that
// calls GET and SET once each, nothing else (the record layout needs no
// more: the script checks the token and status and keeps the fingerprint,
// and SET ... PX writes the completed value with its retention), exactly as
// much as the least hand-written token-checked completion (rawComplete). A
// retried Complete reads and writes nothing more than the GET; a response
// above 3 KiB takes DEL, SETRANGE and PEXPIRE and ends up the same record.
// The first Complete meets a server without the script (NOSCRIPT, then
// EVAL). It logs the server time per call of store and raw, from INFO
// commandstats.
func TestSmallCompleteServerOps(t *testing.T) {
	c := privateClient(t, "ops")
	ctx := context.Background()
	s := redis.MustNew(t, c, redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
	resp := bytes.Repeat([]byte("r"), 100)
	tok := store.NewToken()
	fp := strings.Repeat("f", 64)
	const n = 200
	if err := rawComplete.Load(ctx, c).Err(); err != nil {
		t.Fatal(err)
	}
	// Warm up: the first Complete loads the script.
	if _, err := s.Claim(ctx, "warm", fp, tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "warm", tok, resp, time.Minute); err != nil {
		t.Fatal(err)
	}

	c.ConfigResetStat(ctx)
	for i := range n {
		if _, err := s.Claim(ctx, "k"+strconv.Itoa(i), fp, tok, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	claim := commandStats(t, c)
	c.ConfigResetStat(ctx)
	for i := range n {
		if err := s.Complete(ctx, "k"+strconv.Itoa(i), tok, resp, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	complete := commandStats(t, c)
	// PTTL: whether the lease is still live (a lapsed one is kept LapsedKept).
	want := map[string]int{"evalsha": n, "get": n, "pttl": n, "set": n}
	for name, st := range complete {
		if st.calls != want[name] {
			t.Errorf("%d Completes ran %s %d times, want %d (all: %v)", n, name, st.calls, want[name], complete)
		}
	}
	if len(claim) != 1 || claim["set"].calls != n {
		t.Errorf("%d Claims of new keys ran %v, want %d SETs and nothing else", n, claim, n)
	}
	got, err := s.Get(ctx, "k0")
	if err != nil || got.Status != store.StatusCompleted || got.Fingerprint != fp || !bytes.Equal(got.Response, resp) {
		t.Fatalf("completed record = %+v, %v", got, err)
	}
	c.ConfigResetStat(ctx)
	if err := s.Complete(ctx, "k0", tok, []byte("second"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if retried := commandStats(t, c); len(retried) != 2 || retried["get"].calls != 1 {
		t.Errorf("a retried Complete ran %v, want EVALSHA and its GET only", retried)
	}

	// Up to 3 KiB (a sealed 1 KiB response is 1 KiB and some 30 bytes) the
	// response is concatenated too; above, the script keeps it out of Lua
	// strings it builds: DEL, SETRANGE twice, PEXPIRE, and the same record.
	for _, size := range []int{3 << 10, 3<<10 + 1, 32 << 10} {
		large := bytes.Repeat([]byte("L"), size)
		key := "large" + strconv.Itoa(size)
		if _, err := s.Claim(ctx, key, fp, tok, time.Minute); err != nil {
			t.Fatal(err)
		}
		c.ConfigResetStat(ctx)
		if err := s.Complete(ctx, key, tok, large, time.Minute); err != nil {
			t.Fatal(err)
		}
		want = map[string]int{"evalsha": 1, "get": 1, "pttl": 1, "del": 1, "setrange": 2, "pexpire": 1}
		if size <= 3<<10 {
			want = map[string]int{"evalsha": 1, "get": 1, "pttl": 1, "set": 1}
		}
		stats := commandStats(t, c)
		for name := range want {
			if stats[name].calls != want[name] {
				t.Errorf("a Complete of %d bytes ran %s %d times, want %d (all: %v)", size, name, stats[name].calls, want[name], stats)
			}
		}
		for name, st := range stats {
			if want[name] == 0 {
				t.Errorf("a Complete of %d bytes ran %s %d times, want none", size, name, st.calls)
			}
		}
		got, err = s.Get(ctx, key)
		if err != nil || got.Status != store.StatusCompleted || got.Fingerprint != fp || !bytes.Equal(got.Response, large) {
			t.Fatalf("completed record = %v %q, %v", got.Status, got.Fingerprint, err)
		}
		if ttl := c.PTTL(ctx, "idem:"+key).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("TTL of the %d-byte record = %v, want the retention", size, ttl)
		}
	}

	// Raw: the same claims by hand, and rawComplete.
	val := func(status byte, i int) string {
		b := []byte{1, status, byte(len(tok)), 0, byte(len(fp)), 0, 0, 0, 0, 0, 0, 0, 0}
		b = append(append(b, tok...), fp...)
		if status == 2 {
			b = append(b, resp...)
		}
		return string(b)
	}
	c.ConfigResetStat(ctx)
	for i := range n {
		if err := c.Do(ctx, "set", "raw"+strconv.Itoa(i), val(1, i), "nx", "get", "px", 60000).Err(); err != goredis.Nil {
			t.Fatal(err)
		}
	}
	rawClaim := commandStats(t, c)
	c.ConfigResetStat(ctx)
	for i := range n {
		if r, err := rawComplete.EvalSha(ctx, c, []string{"raw" + strconv.Itoa(i)}, string(tok), val(2, i), 60000).Int64(); err != nil || r != 1 {
			t.Fatal(r, err)
		}
	}
	rawDone := commandStats(t, c)
	per := func(st cmdStat) float64 { return st.usec / float64(max(st.calls, 1)) }
	t.Logf("server µs per call: claim SET %.2f (raw %.2f); Complete EVALSHA %.2f (raw %.2f), of which GET %.2f, SET %.2f (raw %.2f, %.2f)",
		per(claim["set"]), per(rawClaim["set"]), per(complete["evalsha"]), per(rawDone["evalsha"]),
		per(complete["get"]), per(complete["set"]), per(rawDone["get"]), per(rawDone["set"]))
}
