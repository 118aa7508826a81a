package redis_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/testenv"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/storetest"
)

// TestConformanceSentinel runs the suite through a Sentinel failover client:
// it starts its own Redis master and one Sentinel watching it on free
// loopback ports (redis-server is on PATH wherever .ci/run ran) and stops
// both when it ends.
func TestConformanceSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server processes")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("redis-server is not on PATH; CI needs it (bash .ci/run installs it)")
		}
		t.Skip("redis-server is not on PATH")
	}
	dir := t.TempDir()
	masterPort := startRedis(t, bin, dir, "master")
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(
		"sentinel monitor idemkit 127.0.0.1 %d 1\nsentinel down-after-milliseconds idemkit 60000\n", masterPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	sentinelPort := startRedis(t, bin, dir, "sentinel", conf, "--sentinel")

	c := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:    "idemkit",
		SentinelAddrs: []string{"127.0.0.1:" + strconv.Itoa(sentinelPort)},
	})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("failover client: %v", err)
	}
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Subject {
			return storetest.Subject{Store: redis.MustNew(t, c, redis.WithPrefix(testPrefix(t, c)))}
		},
		ShortLease: 200 * time.Millisecond,
	})
}

// startRedis runs redis-server (args first, e.g. a config file) on a free
// loopback port until t ends, and returns the port once it answers PING.
func startRedis(t *testing.T, bin, dir, name string, args ...string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	args = append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, name+".log"))
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return port
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			t.Fatalf("%s on port %d did not answer PING: %v\n%s", name, port, err, log)
		}
		time.Sleep(50 * time.Millisecond) // polling a process we started
	}
}
