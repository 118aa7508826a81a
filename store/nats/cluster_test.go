package nats_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The cluster tests run nats-server v2.15 (the version go.mod's tool line
// pins, built once per test binary by the go command), three nodes on
// private loopback ports, as child processes that can be killed -9 and
// paused for real.

var (
	serverOnce sync.Once
	serverBin  string
	serverErr  error
	serverDir  string
)

// natsServer returns the path of the nats-server binary, building it the
// first time (the go command's build cache makes later runs quick), or
// IDEMKIT_NATS_SERVER_BIN when set: the cluster tests then run on that
// binary (the Debian package's /usr/sbin/nats-server, 2.9, say).
func natsServer(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("IDEMKIT_NATS_SERVER_BIN"); bin != "" {
		return bin
	}
	serverOnce.Do(func() {
		// The go command that runs the tests puts its own GOROOT/bin first
		// in PATH; /usr/local/go/bin is where CI installs it.
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = "/usr/local/go/bin/go"
		}
		serverDir, serverErr = os.MkdirTemp("", "idemkit-nats-server-")
		if serverErr != nil {
			return
		}
		bin := filepath.Join(serverDir, "nats-server")
		cmd := exec.Command(goTool, "build", "-o", bin, "github.com/nats-io/nats-server/v2")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			serverErr = fmt.Errorf("go build nats-server: %v\n%s", err, out)
			return
		}
		serverBin = bin
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverBin
}

// natsNode is one server of a test cluster.
type natsNode struct {
	t         testing.TB
	name      string
	port, cpt int // client and cluster ports
	dir, conf string
	mu        sync.Mutex
	cmd       *exec.Cmd
	paused    bool
	exited    chan struct{}
}

// natsCluster is a JetStream cluster of child processes.
type natsCluster struct {
	t     testing.TB
	nodes []*natsNode
}

// freePorts returns n distinct loopback ports in 24000–25999 that nobody
// listens on at the moment (never NATS's 4222).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	seen := map[int]bool{}
	for try := 0; len(ports) < n && try < 500; try++ {
		p := 24000 + rand.IntN(2000)
		if seen[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		seen[p] = true
		ports = append(ports, p)
	}
	if len(ports) < n {
		t.Fatal("no free ports in 24000-25999")
	}
	return ports
}

// startCluster starts n JetStream servers clustered over loopback, with
// max_payload 8 MiB, and waits until JetStream answers through every one.
func startCluster(t testing.TB, n int) *natsCluster {
	t.Helper()
	bin := natsServer(t)
	ports := freePorts(t, 2*n)
	c := &natsCluster{t: t}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	base := t.TempDir()
	for i := range n {
		nd := &natsNode{t: t, name: fmt.Sprintf("n%d", i+1), port: ports[i], cpt: ports[n+i]}
		nd.dir = filepath.Join(base, nd.name)
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		nd.conf = filepath.Join(nd.dir, "nats.conf")
		conf := fmt.Sprintf(`server_name: %s
host: 127.0.0.1
port: %d
max_payload: 8MB
jetstream { store_dir: %q, max_memory_store: 256MB, max_file_store: 2GB }
cluster { name: idemkit, host: 127.0.0.1, port: %d, routes: [%s] }
`, nd.name, nd.port, filepath.Join(nd.dir, "js"), nd.cpt, strings.Join(routes, ", "))
		if err := os.WriteFile(nd.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, nd)
		nd.start(bin)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.Kill()
		}
	})
	c.WaitHealthy()
	return c
}

// URL returns the client URL of every node, comma-separated.
func (c *natsCluster) URL() string {
	var us []string
	for _, nd := range c.nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", nd.port))
	}
	return strings.Join(us, ",")
}

// Node returns the node named name (a server_name).
func (c *natsCluster) Node(name string) *natsNode {
	for _, nd := range c.nodes {
		if nd.name == name {
			return nd
		}
	}
	c.t.Fatalf("no node %q in the cluster", name)
	return nil
}

// WaitHealthy waits until every node answers and JetStream has a meta
// leader.
func (c *natsCluster) WaitHealthy() {
	c.t.Helper()
	for _, nd := range c.nodes {
		eventually(c.t, 30*time.Second, "JetStream through "+nd.name, func() error {
			nc := tryConnect(fmt.Sprintf("nats://127.0.0.1:%d", nd.port))
			if nc == nil {
				return errors.New("no connection")
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
			return err
		})
	}
}

// StreamLeader returns the node leading the bucket's stream and the nodes
// following it, once the stream has a leader and every replica is current.
func (c *natsCluster) StreamLeader(js jetstream.JetStream, bucket string) (leader *natsNode, followers []*natsNode) {
	c.t.Helper()
	var name string
	eventually(c.t, 30*time.Second, "a leader for bucket "+bucket, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return err
		}
		ci := st.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" {
			return errors.New("no leader")
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		name = ci.Leader
		return nil
	})
	leader = c.Node(name)
	for _, nd := range c.nodes {
		if nd != leader {
			followers = append(followers, nd)
		}
	}
	return leader, followers
}

func (nd *natsNode) start(bin string) {
	nd.t.Helper()
	logf, err := os.OpenFile(filepath.Join(nd.dir, "nats.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		nd.t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", nd.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		nd.t.Fatalf("starting nats-server %s: %v", nd.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	nd.mu.Lock()
	nd.cmd, nd.exited, nd.paused = cmd, exited, false
	nd.mu.Unlock()
	eventually(nd.t, 20*time.Second, "nats-server "+nd.name+" listening", func() error {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", nd.port), 200*time.Millisecond)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// Kill sends SIGKILL (kill -9), resuming nothing, and waits for the process
// to end; it does nothing when the node is not running.
func (nd *natsNode) Kill() {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.cmd = nil
	nd.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Restart starts the node again with its configuration and its store
// directory: what it wrote to disk is recovered.
func (nd *natsNode) Restart() {
	nd.t.Helper()
	nd.Kill()
	nd.start(natsServer(nd.t))
}

// Pause stops the process (SIGSTOP): it keeps its sockets and answers
// nothing until Resume.
func (nd *natsNode) Pause() { nd.signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (nd *natsNode) Resume() { nd.signal(syscall.SIGCONT) }

func (nd *natsNode) signal(sig syscall.Signal) {
	nd.t.Helper()
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.cmd == nil {
		nd.t.Fatalf("nats-server %s is not running", nd.name)
	}
	if err := nd.cmd.Process.Signal(sig); err != nil {
		nd.t.Fatalf("signal %v to nats-server %s: %v", sig, nd.name, err)
	}
}

// eventually calls f until it returns nil, every 50 ms, and fails t with
// f's last error after within. It waits on server processes, never on
// goroutines.
func eventually(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(50 * time.Millisecond) // polling server processes
	}
}

// StreamLeaderWithout waits for the bucket's stream to have a leader other
// than gone (a node that was killed) and returns it, without waiting for
// the replicas to be current.
func (c *natsCluster) StreamLeaderWithout(js jetstream.JetStream, bucket string, gone *natsNode) (*natsNode, time.Duration) {
	c.t.Helper()
	began := time.Now()
	var name string
	eventually(c.t, 30*time.Second, "a new leader for bucket "+bucket, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			return err
		}
		ci := st.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || ci.Leader == gone.name {
			return errors.New("no new leader")
		}
		name = ci.Leader
		return nil
	})
	return c.Node(name), time.Since(began)
}

// ReplicaLag returns how far behind the stream leader sees node nd, in
// Raft operations and time since it was last heard from.
func (c *natsCluster) ReplicaLag(js jetstream.JetStream, bucket string, nd *natsNode) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return "lag unknown: " + err.Error()
	}
	if ci := st.CachedInfo().Cluster; ci != nil {
		for _, r := range ci.Replicas {
			if r.Name == nd.name {
				return fmt.Sprintf("%d operations behind, last heard %v ago", r.Lag, r.Active.Round(time.Millisecond))
			}
		}
	}
	return "lag unknown"
}
