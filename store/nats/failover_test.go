package nats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	idemnats "github.com/idemkit/idemkit/store/nats"
)

// The failover test's workload, the same as store/redis's TestFailover.
// Each key is one payment a client asks for: claim it with a fresh token
// (each attempt is a new request), on Acquired "pay" (count it in the
// ledger) and Complete, retrying the Complete while the lease holds as the
// engine does; on a store error or InProgress, retry the request a little
// later; done on a successful Complete or a replay. The lease is longer
// than Redis's 8 s because a JetStream stream elects a new leader 4 to 9 s
// after the old one stops answering (its Raft election timeout).
const (
	failoverWorkers = 16
	failoverLease   = 15 * time.Second
	failoverOpTime  = 2 * time.Second // each store call's context
)

// failoverResponse is each payment's stored response, 2 KiB.
var failoverResponse = []byte(strings.Repeat("p", 2048))

// failoverStats are what one run counted.
type failoverStats struct {
	keys          int64 // distinct keys asked for
	acquired      int64 // claims reported Acquired to the workload
	completed     int64 // Completes that returned nil
	replays       int64 // claims that found the key completed
	storeErrors   int64 // calls that failed with a store error
	lostClaims    int64 // acknowledged claims whose record vanished before their Complete
	lostCompletes int64 // acknowledged completions whose record vanished
	doubleRuns    int64 // payments beyond the first, over all keys
	gaveUp        int64 // Completes that never succeeded while their lease held
	unfinished    int64 // keys not done by the end
}

func (s failoverStats) String() string {
	return fmt.Sprintf("keys %d, acquired %d, completed %d, replays %d, store errors %d, completes given up %d; "+
		"acknowledged claims lost %d, acknowledged completions lost %d, double runs %d, unfinished %d",
		s.keys, s.acquired, s.completed, s.replays, s.storeErrors, s.gaveUp,
		s.lostClaims, s.lostCompletes, s.doubleRuns, s.unfinished)
}

// keyLedger is what the workload knows of one key: the payments made and
// the claims and completion the store acknowledged.
type keyLedger struct {
	paid      int
	acked     []store.Token // acknowledged claims not (yet) known lost or given up
	completed store.Token   // the token whose Complete returned nil
	counted   map[store.Token]bool
}

type failoverWorkload struct {
	s     store.Store
	st    failoverStats
	mu    sync.Mutex
	books map[string]*keyLedger
}

func (w *failoverWorkload) book(key string) *keyLedger {
	b := w.books[key]
	if b == nil {
		b = &keyLedger{counted: map[store.Token]bool{}}
		w.books[key] = b
	}
	return b
}

// acquired records an acknowledged claim of key by tok. Any earlier
// acknowledged claim of key not given up is lost: the store gave the key
// out again while it was held (or completed).
func (w *failoverWorkload) acquired(key string, tok store.Token) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.book(key)
	for _, old := range b.acked {
		if b.counted[old] {
			continue
		}
		b.counted[old] = true
		if old == b.completed {
			w.st.lostCompletes++
		} else {
			w.st.lostClaims++
		}
	}
	b.acked = append(b.acked, tok)
	b.paid++
	w.st.acquired++
}

// lost records that tok's claim of key was found gone (Complete said
// ErrLeaseLost while its lease was live).
func (w *failoverWorkload) lost(key string, tok store.Token) {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.book(key)
	if !b.counted[tok] {
		b.counted[tok] = true
		w.st.lostClaims++
	}
}

// gaveUp records that tok's Complete did not succeed while its lease held:
// the record lapses and a retry runs the payment again, the engine's
// documented limit, not a lost write (the lease is chosen so that it does
// not happen).
func (w *failoverWorkload) gaveUp(key string, tok store.Token) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.book(key).counted[tok] = true
	w.st.gaveUp++
}

func (w *failoverWorkload) storeError() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.storeErrors++
}

// request runs one key to the end as a retrying client and the engine
// would, and reports whether it got there before deadline.
func (w *failoverWorkload) request(key string, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		tok := store.NewToken()
		ctx, cancel := context.WithTimeout(context.Background(), failoverOpTime)
		cl, err := w.s.Claim(ctx, key, "fp", tok, failoverLease)
		cancel()
		if err != nil {
			w.storeError()
			time.Sleep(20 * time.Millisecond) // the client's retry back-off
			continue
		}
		switch cl.Outcome {
		case store.Completed:
			w.mu.Lock()
			w.st.replays++
			w.mu.Unlock()
			return true
		case store.InProgress:
			time.Sleep(50 * time.Millisecond) // 409: retry later
			continue
		case store.Acquired:
		default:
			panic(fmt.Sprintf("claim %s: outcome %v", key, cl.Outcome))
		}
		w.acquired(key, tok) // and paid
		if w.complete(key, tok) {
			return true
		}
	}
	return false
}

// complete retries Complete while the lease holds.
func (w *failoverWorkload) complete(key string, tok store.Token) bool {
	until := time.Now().Add(failoverLease - failoverOpTime)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), failoverOpTime)
		err := w.s.Complete(ctx, key, tok, failoverResponse, time.Hour)
		cancel()
		switch {
		case err == nil:
			w.mu.Lock()
			w.st.completed++
			w.book(key).completed = tok
			w.mu.Unlock()
			return true
		case errors.Is(err, store.ErrLeaseLost):
			w.lost(key, tok)
			return false
		}
		w.storeError()
		if time.Now().After(until) {
			w.gaveUp(key, tok)
			return false
		}
		time.Sleep(20 * time.Millisecond) // the engine's Complete back-off
	}
}

// The faults runFailover causes once the load is under way.
const (
	// scenarioKill: kill -9 the leader of the bucket's stream; the other
	// two elect a new one; the killed node is restarted and catches up.
	scenarioKill = "stream leader killed"
	// scenarioLag: a follower is stopped (SIGSTOP) and the load goes on
	// for two seconds on the leader and the other follower, then the leader
	// is killed -9 and the stopped follower resumed, behind: the two left
	// elect the one that has every acknowledged write (Raft's vote goes
	// only to a log at least as complete), and the killed node restarts.
	scenarioLag = "stream leader killed while a follower lags"
	// scenarioRestart: every node killed -9 at once and restarted from
	// what it had on disk.
	scenarioRestart = "whole cluster killed and restarted"
)

var failoverScenarios = []string{scenarioKill, scenarioLag, scenarioRestart}

// TestFailover starts a private three-node JetStream cluster (nats-server
// 2.15, file storage, loopback ports), and for each scenario runs the
// payment workload on a fresh R3 bucket, causes the fault under load,
// waits for the bucket's stream to have a leader and every replica current
// again, keeps the load going, then retries every key once more, as a
// client that lost a reply would. It counts acknowledged claims and
// completions that the fault lost and payments made twice, and asserts
// none in every scenario (the figures in RELIABILITY.md come from this
// test, -v).
func TestFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a three-node NATS cluster")
	}
	c := startCluster(t, 3)
	type result struct {
		name string
		st   failoverStats
	}
	var results []result
	for _, sc := range failoverScenarios {
		t.Run(sc, func(t *testing.T) {
			st := runFailover(t, c, sc)
			t.Logf("%s: %v", sc, st)
			results = append(results, result{sc, st})
			assert.Zero(t, st.unfinished, "every key got done")
			assert.Positive(t, st.storeErrors, "the fault was felt")
			assert.Zero(t, st.lostClaims, "acknowledged claims lost")
			assert.Zero(t, st.lostCompletes, "acknowledged completions lost")
			assert.Zero(t, st.doubleRuns, "double runs")
			assert.Zero(t, st.gaveUp, "Completes given up (the lease must outlast the failover)")
		})
	}
	for _, r := range results {
		t.Logf("%-45s %v", r.name, r.st)
	}
}

// runFailover runs the workload on a new R3 bucket of c through a new
// connection, causes the scenario's fault once it is under way, and returns
// the counts.
func runFailover(t *testing.T, c *natsCluster, scenario string) failoverStats {
	nc, err := natsgo.Connect(c.URL(), natsgo.Timeout(time.Second), natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(100*time.Millisecond), natsgo.ReconnectBufSize(-1),
		natsgo.PingInterval(500*time.Millisecond), natsgo.MaxPingsOutstanding(2))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	s := newStore(t, nc, idemnats.WithReplicas(3))
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	w := &failoverWorkload{s: s, books: map[string]*keyLedger{}}

	var (
		next     atomic.Int64
		stop     = make(chan struct{})
		done     sync.WaitGroup
		warm     = make(chan struct{})
		warmOnce sync.Once
	)
	deadline := time.Now().Add(60 * time.Second)
	for range failoverWorkers {
		done.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := next.Add(1)
				if i == 200 {
					warmOnce.Do(func() { close(warm) })
				}
				if !w.request(fmt.Sprint("pay", i), deadline) {
					w.mu.Lock()
					w.st.unfinished++
					w.mu.Unlock()
				}
			}
		})
	}

	<-warm
	leader, followers := c.StreamLeader(js, s.Bucket())
	faulted := time.Now()
	switch scenario {
	case scenarioKill:
		leader.Kill()
		newLeader, _ := c.StreamLeaderWithout(js, s.Bucket(), leader)
		t.Logf("killed stream leader %s; %s leads after %v", leader.name, newLeader.name, time.Since(faulted).Round(10*time.Millisecond))
		leader.Restart()
	case scenarioLag:
		lagging := followers[0]
		lagging.Pause()
		time.Sleep(2 * time.Second) // the load goes on while the follower lags: the clock is the subject
		lag := c.ReplicaLag(js, s.Bucket(), lagging)
		leader.Kill()
		lagging.Resume()
		newLeader, _ := c.StreamLeaderWithout(js, s.Bucket(), leader)
		t.Logf("paused follower %s (%s, as the leader saw it), killed stream leader %s 2 s after the pause; %s leads after %v",
			lagging.name, lag, leader.name, newLeader.name, time.Since(faulted).Round(10*time.Millisecond))
		leader.Restart()
	case scenarioRestart:
		for _, nd := range c.nodes {
			nd.Kill()
		}
		for _, nd := range c.nodes {
			nd.Restart()
		}
		t.Logf("killed and restarted all three nodes")
	}
	c.WaitHealthy()
	newLeader, _ := c.StreamLeader(js, s.Bucket())
	t.Logf("%s: stream led by %s, every replica current, %v after the fault", scenario, newLeader.name, time.Since(faulted).Round(10*time.Millisecond))
	time.Sleep(500 * time.Millisecond) // more load on the healed cluster: the real clock is the subject
	close(stop)
	done.Wait()

	// Every key once more, as a client whose reply was lost retries it.
	keys := int(next.Load())
	var again sync.WaitGroup
	work := make(chan string)
	for range failoverWorkers {
		again.Go(func() {
			for key := range work {
				if !w.request(key, deadline) {
					w.mu.Lock()
					w.st.unfinished++
					w.mu.Unlock()
				}
			}
		})
	}
	for i := 1; i <= keys; i++ {
		work <- fmt.Sprint("pay", i)
	}
	close(work)
	again.Wait()

	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	for _, b := range w.books {
		if b.paid > 1 {
			st.doubleRuns += int64(b.paid - 1)
		}
	}
	st.keys = int64(keys)
	return st
}
