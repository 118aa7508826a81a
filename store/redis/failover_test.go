package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/testredis"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// The failover test's workload. Each key is one payment a client asks for:
// claim it with a fresh token (each attempt is a new request), on Acquired
// "pay" (count it in the ledger) and Complete, retrying the Complete while
// the lease holds as the engine does; on a store error or InProgress, retry
// the request a little later; done on a successful Complete or a replay.
const (
	failoverWorkers = 16
	failoverLease   = 8 * time.Second
	failoverOpTime  = 2 * time.Second // each store call's context
)

// failoverResponse is each payment's stored response, 2 KiB: large enough
// that a lagging replica's backlog outgrows the socket buffers.
var failoverResponse = []byte(strings.Repeat("p", 2048))

// failoverStats are what one run counted.
type failoverStats struct {
	keys          int64 // distinct keys asked for
	acquired      int64 // claims reported Acquired to the workload
	completed     int64 // Completes that returned nil
	replays       int64 // claims that found the key completed
	storeErrors   int64 // calls that failed with a store error
	notReplicated int64 // of which ErrNotReplicated
	lostClaims    int64 // acknowledged claims whose record vanished before their Complete
	lostCompletes int64 // acknowledged completions whose record vanished
	doubleRuns    int64 // payments beyond the first, over all keys
	unfinished    int64 // keys not done by the end
}

func (s failoverStats) String() string {
	return fmt.Sprintf("keys %d, acquired %d, completed %d, replays %d, store errors %d (not replicated %d); "+
		"acknowledged claims lost %d, acknowledged completions lost %d, double runs %d, unfinished %d",
		s.keys, s.acquired, s.completed, s.replays, s.storeErrors, s.notReplicated,
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
	s     *redis.Store
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
// the record lapses and a retry runs the payment again, which is the
// engine's documented limit, not a lost write.
func (w *failoverWorkload) gaveUp(key string, tok store.Token) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.book(key).counted[tok] = true
}

func (w *failoverWorkload) storeError(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.storeErrors++
	if errors.Is(err, redis.ErrNotReplicated) {
		w.st.notReplicated++
	}
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
			w.storeError(err)
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
		w.storeError(err)
		if time.Now().After(until) {
			w.gaveUp(key, tok)
			return false
		}
		time.Sleep(20 * time.Millisecond) // the engine's Complete back-off
	}
}

// TestFailover starts a private Redis Cluster of three masters with a
// replica each (cluster-node-timeout 1 s), runs the payment workload on it
// with and without WithReplicas, and in each run kills -9 a master under
// load, waits for its replica to be promoted, restarts the killed node (it
// rejoins as a replica) and keeps the load going. Then every key is retried
// once more, as a client that lost a reply would. It counts acknowledged
// claims and completions that the failover lost and payments made twice.
// With WithReplicas(1, …) none may be lost; without it, whatever happened
// is reported (the figures in RELIABILITY.md come from this test, -v).
func TestFailover(t *testing.T) {
	cluster := testredis.StartCluster(t, 3, time.Second, "--cluster-replica-validity-factor", "0")
	ctx := context.Background()

	t.Run("persistence check names every master", func(t *testing.T) {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { c.Close() })
		err := newStore(t, c).CheckPersistence(ctx)
		require.ErrorIs(t, err, redis.ErrNoPersistence)
		for _, n := range cluster.Nodes[:3] {
			assert.Contains(t, err.Error(), n.Addr)
		}
		for _, n := range cluster.Nodes[3:] {
			assert.NotContains(t, err.Error(), n.Addr, "replicas are not checked")
		}
	})

	t.Run("WAIT goes to the key's master", func(t *testing.T) {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cluster.Addrs()})
		t.Cleanup(func() { c.Close() })
		prefix := testPrefix(t, c)
		s := newStore(t, c, redis.WithPrefix(prefix), redis.WithReplicas(1, 200*time.Millisecond))
		pausedMaster := cluster.MasterOf(prefix + "k0")
		onPaused := map[string]bool{}
		for i := range 12 {
			key := fmt.Sprint("k", i)
			onPaused[key] = cluster.MasterOf(prefix+key) == pausedMaster
		}
		paused := cluster.ReplicaOf(pausedMaster)
		paused.Pause()
		defer paused.Resume()
		var ok, failed int
		for i := range 12 {
			key := fmt.Sprint("k", i)
			pausedShard := onPaused[key]
			cl, err := s.Claim(ctx, key, "fp", store.NewToken(), time.Minute)
			if pausedShard {
				wantNotReplicated(t, err, "claim")
				failed++
			} else {
				require.NoError(t, err, key)
				assert.Equal(t, store.Acquired, cl.Outcome)
				ok++
			}
		}
		assert.Positive(t, ok)
		assert.Positive(t, failed)
	})

	type result struct {
		name string
		st   failoverStats
	}
	var results []result
	for _, sc := range failoverScenarios {
		for _, mode := range []struct {
			name string
			opts []redis.Option
		}{
			{"without WAIT", nil},
			{"with WAIT 1", []redis.Option{redis.WithReplicas(1, 500*time.Millisecond)}},
		} {
			name := sc + "/" + mode.name
			t.Run(name, func(t *testing.T) {
				cluster.WaitHealthy()
				st := runFailover(t, cluster, mode.opts, sc)
				t.Logf("%s: %v", name, st)
				results = append(results, result{name, st})
				assert.Zero(t, st.unfinished, "every key got done")
				assert.Positive(t, st.storeErrors, "the fault was felt")
				assert.Equal(t, st.lostClaims+st.lostCompletes, st.doubleRuns,
					"every lost record, and nothing else, made a payment run twice")
				switch {
				case sc == scenarioRestart:
					assert.Positive(t, st.lostCompletes, "a master restarted without persistence forgets its records, WAIT or not")
				case len(mode.opts) > 0:
					assert.Zero(t, st.lostClaims, "acknowledged claims lost")
					assert.Zero(t, st.lostCompletes, "acknowledged completions lost")
				}
			})
		}
	}
	for _, r := range results {
		t.Logf("%-40s %v", r.name, r.st)
	}
}

// The faults runFailover causes once the load is under way.
const (
	// scenarioKill: kill -9 a master; its replica is promoted; the killed
	// node is restarted and rejoins as a replica.
	scenarioKill = "master killed"
	// scenarioLag: the master's replica stops (SIGSTOP) and the master
	// drops its link (CLIENT KILL TYPE replica), as in a partition between
	// the two; a second later, load still running, the master is killed -9,
	// then the replica resumes and is promoted with what it got.
	scenarioLag = "master killed while its replica lags"
	// scenarioRestart: kill -9 a master and restart it at once, before the
	// cluster notices: with no persistence it comes back empty and still
	// master, and its replica resynchronises to empty.
	scenarioRestart = "master restarted without persistence"
)

var failoverScenarios = []string{scenarioKill, scenarioLag, scenarioRestart}

// runFailover runs the workload on cluster through a new client and store
// (opts added), kills a master once it is under way, and returns the counts.
func runFailover(t *testing.T, cluster *testredis.Cluster, opts []redis.Option, scenario string) failoverStats {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 cluster.Addrs(),
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
		ContextTimeoutEnabled: true,
		PoolSize:              failoverWorkers,
	})
	t.Cleanup(func() { c.Close() })
	prefix := testPrefix(t, c)
	w := &failoverWorkload{s: newStore(t, c, append([]redis.Option{redis.WithPrefix(prefix)}, opts...)...),
		books: map[string]*keyLedger{}}

	var (
		next     atomic.Int64
		stop     = make(chan struct{})
		done     sync.WaitGroup
		warm     = make(chan struct{})
		warmOnce sync.Once
	)
	deadline := time.Now().Add(40 * time.Second)
	for range failoverWorkers {
		done.Add(1)
		go func() {
			defer done.Done()
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
		}()
	}

	<-warm
	victim := cluster.MasterOf(prefix + "pay1")
	heir := cluster.ReplicaOf(victim)
	var promoted, healthy time.Duration
	switch scenario {
	case scenarioRestart:
		victim.Kill()
		victim.Restart()
		cluster.WaitHealthy()
		role, err := testredis.Role(victim)
		require.NoError(t, err)
		require.Equal(t, "master", role, "restarted before any failover")
		t.Logf("killed master %s and restarted it at once", victim.Addr)
	default:
		if scenario == scenarioLag {
			heir.Pause()
			// The master drops the link to its stopped replica, which cannot
			// reconnect: what the master acknowledges from now on is on the
			// master alone.
			require.NoError(t, victim.Client().Do(context.Background(), "client", "kill", "type", "replica").Err())
			time.Sleep(time.Second) // the load goes on while the replica lags: the clock is the subject
		}
		killed := time.Now()
		victim.Kill()
		if scenario == scenarioLag {
			heir.Resume()
		}
		testredis.Eventually(t, 20*time.Second, "replica "+heir.Addr+" promoted", func() error {
			role, err := testredis.Role(heir)
			if err != nil {
				return err
			}
			if role != "master" {
				return fmt.Errorf("role %s", role)
			}
			return nil
		})
		promoted = time.Since(killed)
		victim.Restart() // rejoins as a replica of heir, empty (no persistence)
		cluster.WaitHealthy()
		healthy = time.Since(killed)
		t.Logf("killed master %s: replica %s promoted after %v, cluster healthy again after %v",
			victim.Addr, heir.Addr, promoted.Round(10*time.Millisecond), healthy.Round(10*time.Millisecond))
	}
	time.Sleep(500 * time.Millisecond) // more load on the healed cluster: the real clock is the subject
	close(stop)
	done.Wait()

	// Every key once more, as a client whose reply was lost retries it.
	keys := int(next.Load())
	var again sync.WaitGroup
	work := make(chan string)
	for range failoverWorkers {
		again.Add(1)
		go func() {
			defer again.Done()
			for key := range work {
				if !w.request(key, deadline) {
					w.mu.Lock()
					w.st.unfinished++
					w.mu.Unlock()
				}
			}
		}()
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
