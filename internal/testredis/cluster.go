package testredis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster a test started on private loopback ports:
// masters with one replica each, every node a Server of its own (so a test
// can kill, pause or restart one). It is killed when the test ends.
type Cluster struct {
	Nodes []*Server // the masters first, then their replicas in the same order

	t testing.TB
}

// StartCluster starts 2×masters cluster nodes without persistence (unless
// args say otherwise) and with the given cluster-node-timeout, splits the
// slots evenly over the first masters, makes node masters+i a replica of
// node i, and returns once every node reports cluster_state:ok and every
// replica's link is up.
func StartCluster(t testing.TB, masters int, nodeTimeout time.Duration, args ...string) *Cluster {
	t.Helper()
	ctx := context.Background()
	c := &Cluster{t: t}
	for range 2 * masters {
		c.Nodes = append(c.Nodes, Start(t, append([]string{"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}, args...)...))
	}
	clients := make([]*goredis.Client, len(c.Nodes))
	for i, n := range c.Nodes {
		clients[i] = n.Client()
	}
	for i := 1; i < len(c.Nodes); i++ {
		if err := clients[i].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Nodes[0].Port)).Err(); err != nil {
			t.Fatalf("CLUSTER MEET from %s: %v", c.Nodes[i].Addr, err)
		}
	}
	for i := range masters {
		lo, hi := i*16384/masters, (i+1)*16384/masters-1
		if err := clients[i].ClusterAddSlotsRange(ctx, lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE %d %d on %s: %v", lo, hi, c.Nodes[i].Addr, err)
		}
	}
	for i, cl := range clients {
		Eventually(t, 10*time.Second, c.Nodes[i].Addr+" knows every node", func() error {
			out, err := cl.ClusterNodes(ctx).Result()
			if err != nil {
				return err
			}
			if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != len(c.Nodes) || strings.Contains(out, "handshake") {
				return fmt.Errorf("sees %d nodes:\n%s", n, out)
			}
			return nil
		})
	}
	for i := range masters {
		id := c.ID(c.Nodes[i])
		r := clients[masters+i]
		Eventually(t, 10*time.Second, "CLUSTER REPLICATE on "+c.Nodes[masters+i].Addr, func() error {
			return r.ClusterReplicate(ctx, id).Err()
		})
	}
	c.WaitHealthy()
	return c
}

// Addrs returns every node's address, for redis.ClusterOptions.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return addrs
}

// ID returns n's cluster node id.
func (c *Cluster) ID(n *Server) string {
	c.t.Helper()
	cl := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1})
	defer cl.Close()
	id, err := cl.Do(context.Background(), "cluster", "myid").Text()
	if err != nil {
		c.t.Fatalf("CLUSTER MYID on %s: %v", n.Addr, err)
	}
	return id
}

// Role returns "master" or "slave" as n reports itself in INFO replication,
// or an error when n does not answer.
func Role(n *Server) (string, error) {
	cl := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond})
	defer cl.Close()
	info, err := cl.Info(context.Background(), "replication").Result()
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\r\n") {
		if r, ok := strings.CutPrefix(line, "role:"); ok {
			return r, nil
		}
	}
	return "", fmt.Errorf("no role in INFO replication of %s", n.Addr)
}

// MasterOf returns the node that serves key's slot as master, as the first
// live node reports it in CLUSTER NODES.
func (c *Cluster) MasterOf(key string) *Server {
	c.t.Helper()
	slot := slotOf(key)
	for _, n := range c.Nodes {
		cl := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
			ReadTimeout: 500 * time.Millisecond})
		out, err := cl.ClusterNodes(context.Background()).Result()
		cl.Close()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			// id addr@bus flags master-id ping pong epoch link slot...
			if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, isRange := strings.Cut(r, "-")
				if !isRange {
					hi = lo
				}
				a, errA := strconv.Atoi(lo)
				b, errB := strconv.Atoi(hi)
				if errA == nil && errB == nil && a <= slot && slot <= b {
					addr, _, _ := strings.Cut(f[1], "@")
					return c.byAddr(addr)
				}
			}
		}
	}
	c.t.Fatalf("no node serves the slot of %q", key)
	return nil
}

// ReplicaOf returns a live replica of master (by the master's own INFO).
func (c *Cluster) ReplicaOf(master *Server) *Server {
	c.t.Helper()
	cl := goredis.NewClient(&goredis.Options{Addr: master.Addr, MaxRetries: -1})
	defer cl.Close()
	info, err := cl.Info(context.Background(), "replication").Result()
	if err != nil {
		c.t.Fatalf("INFO replication on %s: %v", master.Addr, err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(line, "slave0:") {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(strings.TrimPrefix(line, "slave0:"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		return c.byAddr(ip + ":" + port)
	}
	c.t.Fatalf("%s has no replica:\n%s", master.Addr, info)
	return nil
}

func (c *Cluster) byAddr(addr string) *Server {
	c.t.Helper()
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	c.t.Fatalf("%s is not a node of this cluster", addr)
	return nil
}

// WaitHealthy waits until every node reports cluster_state:ok, every master
// has an online replica, every replica has its link to its master up, and
// there are as many replicas as masters.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	ctx := context.Background()
	Eventually(c.t, 30*time.Second, "cluster healthy", func() error {
		masters, replicas := 0, 0
		for _, n := range c.Nodes {
			cl := goredis.NewClient(&goredis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
				ReadTimeout: 500 * time.Millisecond})
			info, err := cl.ClusterInfo(ctx).Result()
			var repl string
			if err == nil {
				repl, err = cl.Info(ctx, "replication").Result()
			}
			cl.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", n.Addr, err)
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return fmt.Errorf("%s: cluster state not ok", n.Addr)
			}
			switch {
			case strings.Contains(repl, "role:master"):
				if !strings.Contains(repl, "state=online") {
					return fmt.Errorf("%s: master without an online replica", n.Addr)
				}
				masters++
			case strings.Contains(repl, "master_link_status:up"):
				replicas++
			default:
				return fmt.Errorf("%s: replica link not up", n.Addr)
			}
		}
		if masters != replicas {
			return fmt.Errorf("%d masters, %d replicas with a link up", masters, replicas)
		}
		return nil
	})
}

// slotOf is the cluster hash slot of key (CRC16 of the key or of its hash
// tag, modulo 16384).
func slotOf(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
