package redis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redis"
)

// roundTrips counts what a client sends: one per command outside a
// pipeline, one per pipeline, and the names of all commands; a new
// connection's handshake (HELLO, CLIENT SETINFO) does not count. (A
// transaction's commands, WATCH … EXEC, go through hooks of their own and
// are not seen: the old path of large completions counted 1, not 3.)
type roundTrips struct {
	mu    sync.Mutex
	trips int
	names []string
}

func (h *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if handshake(cmd) {
			return next(ctx, cmd)
		}
		h.mu.Lock()
		h.trips++
		h.names = append(h.names, cmd.Name())
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if len(cmds) > 0 && handshake(cmds[0]) {
			return next(ctx, cmds)
		}
		h.mu.Lock()
		h.trips++
		for _, c := range cmds {
			h.names = append(h.names, c.Name())
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func handshake(cmd goredis.Cmder) bool { return cmd.Name() == "hello" || cmd.Name() == "client" }

func (h *roundTrips) reset() {
	h.mu.Lock()
	h.trips, h.names = 0, nil
	h.mu.Unlock()
}

func (h *roundTrips) get() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.trips, append([]string(nil), h.names...)
}

// stageClients returns the servers the staged completion is checked on:
// miniredis, the real Redis and the Cluster, each a fresh client.
func stageClients(t *testing.T) map[string]goredis.UniversalClient {
	_, mini := newMini(t)
	return map[string]goredis.UniversalClient{
		"Miniredis": mini,
		"Redis":     realClient(t),
		"Cluster":   clusterClient(t),
	}
}

// loadCommit loads the staged completion's script on every node, so that a
// count of round trips sees no NOSCRIPT.
func loadCommit(t *testing.T, c goredis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error {
			return redis.CommitScript.Load(ctx, n).Err()
		})
	} else {
		err = redis.CommitScript.Load(ctx, c).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// stagingKeys returns every staging key under prefix p, on every master.
func stagingKeys(t *testing.T, c goredis.UniversalClient, p string) []string {
	t.Helper()
	ctx := context.Background()
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, n goredis.UniversalClient) error {
		iter := n.Scan(ctx, 0, p+"*:stage:*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestStagedCompleteOneRoundTrip: a Claim and a Complete with a 1 MiB
// response are two round trips in all (WATCH … MULTI/EXEC made it three),
// with no WATCH or MULTI, on a single node and on a Cluster, with and
// without a hash tag in the prefix, and the record stored is the completed
// record with its full retention (the RENAMEd staging key's short expiry
// replaced).
func TestStagedCompleteOneRoundTrip(t *testing.T) {
	ctx := context.Background()
	resp := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	for name, c := range stageClients(t) {
		for _, tag := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tag=%v", name, tag), func(t *testing.T) {
				prefix := testPrefix(t, c)
				if tag {
					prefix = "{" + strings.TrimSuffix(prefix, ":") + "}:"
					t.Cleanup(func() { deleteUnder(t, c, prefix) })
				}
				h := &roundTrips{}
				c.AddHook(h) // the hook only counts: other subtests' clients are unaffected in what they do
				s := redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
				loadCommit(t, c)
				tok := store.NewToken()
				// The first large Complete makes the Store remember claims.
				if _, err := s.Claim(ctx, "warm", "fp", tok, time.Minute); err != nil {
					t.Fatal(err)
				}
				if err := s.Complete(ctx, "warm", tok, resp, time.Minute); err != nil {
					t.Fatal(err)
				}
				for i := range 4 {
					key := fmt.Sprintf("k%d", i)
					fp := fmt.Sprintf("fingerprint-%d", i)
					h.reset()
					cl, err := s.Claim(ctx, key, fp, tok, time.Minute)
					if err != nil || cl.Outcome != store.Acquired {
						t.Fatalf("claim %s: %v, %v", key, cl.Outcome, err)
					}
					if err := s.Complete(ctx, key, tok, resp, 10*time.Minute); err != nil {
						t.Fatalf("complete %s: %v", key, err)
					}
					trips, names := h.get()
					if got := strings.Join(names, " "); trips != 2 || got != "set set evalsha" {
						t.Errorf("claim + complete of %s: %d round trips %q, want 2: set, then set and evalsha in one pipeline", key, trips, got)
					}
					rec, err := s.Get(ctx, key)
					if err != nil {
						t.Fatal(err)
					}
					if rec.Status != store.StatusCompleted || rec.Token != tok || rec.Fingerprint != fp || !bytes.Equal(rec.Response, resp) {
						t.Errorf("record %s: status %v, token %q, fingerprint %q, %d response bytes", key, rec.Status, rec.Token, rec.Fingerprint, len(rec.Response))
					}
					if ttl := c.PTTL(ctx, prefix+key).Val(); ttl <= redis.StageTTL || ttl > 10*time.Minute {
						t.Errorf("record %s expires in %v, want its retention (10m)", key, ttl)
					}
				}
				if left := stagingKeys(t, c, prefix); len(left) > 0 {
					t.Errorf("staging keys left behind: %q", left)
				}
			})
		}
	}
}

// deleteUnder deletes every key under p, on every master.
func deleteUnder(t *testing.T, c goredis.UniversalClient, p string) {
	t.Helper()
	ctx := context.Background()
	del := func(ctx context.Context, n goredis.UniversalClient) error {
		iter := n.Scan(ctx, 0, p+"*", 1000).Iterator()
		for iter.Next(ctx) {
			n.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := c.(*goredis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *goredis.Client) error { return del(ctx, n) })
		return
	}
	_ = del(ctx, c)
}

// TestStagedCompleteCases: whatever the staged path meets, the record ends
// as the contract says and no staging key stays behind: a fingerprint
// remembered wrong (the script refuses the staged value and Complete falls
// back), a key whose braces allow no staging key in its slot, a lease lost
// to another token, a retried Complete with another response (the first
// stays), a record that is not one.
func TestStagedCompleteCases(t *testing.T) {
	ctx := context.Background()
	big := func(b byte) []byte { return bytes.Repeat([]byte{b}, 128<<10) }
	for name, c := range stageClients(t) {
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix(t, c)
			s := redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false))
			redis.StageEveryComplete(s)
			tok, other := store.NewToken(), store.NewToken()
			claim := func(key, fp string, tok store.Token) {
				t.Helper()
				if cl, err := s.Claim(ctx, key, fp, tok, time.Minute); err != nil || cl.Outcome != store.Acquired {
					t.Fatalf("claim %s: %v, %v", key, cl.Outcome, err)
				}
			}
			check := func(key, fp string, resp []byte) {
				t.Helper()
				rec, err := s.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Status != store.StatusCompleted || rec.Token != tok || rec.Fingerprint != fp || !bytes.Equal(rec.Response, resp) {
					t.Errorf("record %s: status %v, token %q, fingerprint %q, %d response bytes (first %q)",
						key, rec.Status, rec.Token, rec.Fingerprint, len(rec.Response), rec.Response[:min(1, len(rec.Response))])
				}
			}

			t.Run("WrongFingerprint", func(t *testing.T) {
				claim("wrong-fp", "the-real-one", tok)
				redis.RememberFingerprint(s, "wrong-fp", tok, "a-wrong-guess")
				if err := s.Complete(ctx, "wrong-fp", tok, big('a'), time.Minute); err != nil {
					t.Fatal(err)
				}
				check("wrong-fp", "the-real-one", big('a'))
			})
			t.Run("WrongFingerprintLength", func(t *testing.T) {
				claim("wrong-len", "fp", tok)
				redis.RememberFingerprint(s, "wrong-len", tok, "f")
				if err := s.Complete(ctx, "wrong-len", tok, big('b'), time.Minute); err != nil {
					t.Fatal(err)
				}
				check("wrong-len", "fp", big('b'))
			})
			t.Run("NoStagingKeyPossible", func(t *testing.T) {
				for _, key := range []string{"a}b", "x{}y", "{unclosed"} {
					claim(key, "fp", tok)
					if err := s.Complete(ctx, key, tok, big('c'), time.Minute); err != nil {
						t.Fatal(err)
					}
					check(key, "fp", big('c'))
				}
			})
			t.Run("HashTagInKey", func(t *testing.T) {
				claim("{order-1}:pay", "fp", tok)
				if err := s.Complete(ctx, "{order-1}:pay", tok, big('d'), time.Minute); err != nil {
					t.Fatal(err)
				}
				check("{order-1}:pay", "fp", big('d'))
			})
			t.Run("LeaseLost", func(t *testing.T) {
				claim("lost", "fp", tok)
				if err := c.Del(ctx, prefix+"lost").Err(); err != nil { // the lease lapsed
					t.Fatal(err)
				}
				if cl, err := s.Claim(ctx, "lost", "fp", other, time.Minute); err != nil || cl.Outcome != store.Acquired {
					t.Fatalf("other's claim: %v, %v", cl.Outcome, err)
				}
				redis.RememberFingerprint(s, "lost", tok, "fp") // as if tok's claim were still the latest
				err := s.Complete(ctx, "lost", tok, big('e'), time.Minute)
				if !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("complete after the lease was lost: %v, want ErrLeaseLost", err)
				}
				rec, err := s.Get(ctx, "lost")
				if err != nil || rec.Status != store.StatusInProgress || rec.Token != other {
					t.Errorf("the next holder's record: %+v, %v", rec, err)
				}
				if err := c.Del(ctx, prefix+"absent").Err(); err != nil {
					t.Fatal(err)
				}
				redis.RememberFingerprint(s, "absent", tok, "fp")
				if err := s.Complete(ctx, "absent", tok, big('e'), time.Minute); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("complete of an absent key: %v, want ErrLeaseLost", err)
				}
			})
			t.Run("RetryKeepsFirst", func(t *testing.T) {
				claim("retried", "fp", tok)
				if err := s.Complete(ctx, "retried", tok, big('f'), time.Minute); err != nil {
					t.Fatal(err)
				}
				redis.RememberFingerprint(s, "retried", tok, "fp")
				if err := s.Complete(ctx, "retried", tok, big('g'), time.Hour); err != nil {
					t.Fatal(err)
				}
				check("retried", "fp", big('f'))
				if ttl := c.PTTL(ctx, prefix+"retried").Val(); ttl > time.Minute {
					t.Errorf("the retried Complete changed the retention: expires in %v", ttl)
				}
			})
			t.Run("NotARecord", func(t *testing.T) {
				if err := c.Set(ctx, prefix+"junk", "\x07not a record", time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				redis.RememberFingerprint(s, "junk", tok, "fp")
				if err := s.Complete(ctx, "junk", tok, big('h'), time.Minute); err == nil {
					t.Fatal("complete of a value that is not a record succeeded")
				}
				if v := c.Get(ctx, prefix+"junk").Val(); v != "\x07not a record" {
					t.Errorf("the value was changed to %d bytes", len(v))
				}
			})
			if left := stagingKeys(t, c, prefix); len(left) > 0 {
				t.Errorf("staging keys left behind: %q", left)
			}
		})
	}
}

// failScript lets a pipeline's SET through and fails the script after it
// with a broken connection, as when the connection drops between the two.
type failScript struct{ on atomic.Bool }

func (h *failScript) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *failScript) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (h *failScript) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if !h.on.Load() || len(cmds) != 2 || cmds[1].Name() != "evalsha" {
			return next(ctx, cmds)
		}
		err := next(ctx, cmds[:1])
		cmds[1].SetErr(errors.New("connection reset by peer"))
		if err == nil {
			err = cmds[1].Err()
		}
		return err
	}
}

// TestStagedCompleteInterrupted: a staging key whose script never ran
// expires within StageTTL, the record stays in progress, and the retried
// Complete completes it.
func TestStagedCompleteInterrupted(t *testing.T) {
	ctx := context.Background()
	c := realClient(t)
	h := &failScript{}
	c.AddHook(h)
	prefix := testPrefix(t, c)
	s := redis.StageEveryComplete(redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false)))
	tok := store.NewToken()
	if _, err := s.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	h.on.Store(true)
	if err := s.Complete(ctx, "k", tok, []byte("response"), time.Minute); err == nil {
		t.Fatal("Complete succeeded although its script never ran")
	}
	h.on.Store(false)
	left := stagingKeys(t, c, prefix)
	if len(left) != 1 {
		t.Fatalf("staging keys: %q, want the one whose script never ran", left)
	}
	if ttl := c.PTTL(ctx, left[0]).Val(); ttl <= 0 || ttl > redis.StageTTL {
		t.Errorf("the staging key expires in %v, want within %v", ttl, redis.StageTTL)
	}
	if rec, err := s.Get(ctx, "k"); err != nil || rec.Status != store.StatusInProgress {
		t.Fatalf("record after the failed Complete: %+v, %v", rec, err)
	}
	if err := s.Complete(ctx, "k", tok, []byte("response"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Get(ctx, "k"); err != nil || rec.Status != store.StatusCompleted || string(rec.Response) != "response" {
		t.Fatalf("record after the retry: %+v, %v", rec, err)
	}
}

// TestStagedCompleteRace: concurrent Completes of one key by its holder,
// each with its own response (retries racing each other), all succeed, the
// record keeps one of their responses, whole, and later retries change
// nothing. Concurrent Completes by a token that does not hold it all fail
// with ErrLeaseLost and leave the record alone.
func TestStagedCompleteRace(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]goredis.UniversalClient{"Redis": realClient(t), "Cluster": clusterClient(t)} {
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix(t, c)
			newStore := func() *redis.Store {
				return redis.StageEveryComplete(redis.MustNew(t, c, redis.WithPrefix(prefix), redis.WithEvictionCheck(false), redis.WithPersistenceCheck(false)))
			}
			s := newStore()
			const n = 8
			// Each racer its own Store, remembering the claim: every one
			// of them takes the staged path.
			holders, intruders := make([]*redis.Store, n), make([]*redis.Store, n)
			for i := range n {
				holders[i], intruders[i] = newStore(), newStore()
			}
			for round := range 20 {
				key := fmt.Sprintf("k%d", round)
				tok, intruder := store.NewToken(), store.NewToken()
				if _, err := s.Claim(ctx, key, "fp", tok, time.Minute); err != nil {
					t.Fatal(err)
				}
				resps := make([][]byte, n)
				errs := make([]error, 2*n)
				var wg sync.WaitGroup
				for i := range n {
					resps[i] = bytes.Repeat([]byte{byte('a' + i)}, 4096+i)
					redis.RememberFingerprint(holders[i], key, tok, "fp")
					redis.RememberFingerprint(intruders[i], key, intruder, "fp")
				}
				for i := range n {
					wg.Add(2)
					go func() { defer wg.Done(); errs[i] = holders[i].Complete(ctx, key, tok, resps[i], time.Minute) }()
					go func() {
						defer wg.Done()
						errs[n+i] = intruders[i].Complete(ctx, key, intruder, []byte("intruder"), time.Minute)
					}()
				}
				wg.Wait()
				for i, err := range errs {
					if i < n && err != nil {
						t.Fatalf("holder's Complete %d: %v", i, err)
					}
					if i >= n && !errors.Is(err, store.ErrLeaseLost) {
						t.Fatalf("intruder's Complete: %v, want ErrLeaseLost", err)
					}
				}
				rec, err := s.Get(ctx, key)
				if err != nil || rec.Status != store.StatusCompleted || rec.Token != tok || rec.Fingerprint != "fp" {
					t.Fatalf("record: %+v, %v", rec, err)
				}
				first := -1
				for i := range resps {
					if bytes.Equal(rec.Response, resps[i]) {
						first = i
					}
				}
				if first < 0 {
					t.Fatalf("the stored response (%d bytes) is none of those completed", len(rec.Response))
				}
				if err := s.Complete(ctx, key, tok, []byte("later"), time.Minute); err != nil {
					t.Fatal(err)
				}
				if again, _ := s.Get(ctx, key); !bytes.Equal(again.Response, resps[first]) {
					t.Fatalf("a later retry replaced the response")
				}
			}
			if left := stagingKeys(t, c, prefix); len(left) > 0 {
				t.Errorf("staging keys left behind: %q", left)
			}
		})
	}
}
