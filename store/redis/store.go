package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/coalesce"
	"github.com/idemkit/idemkit/internal/invalid"
	"github.com/idemkit/idemkit/store"
)

// DefaultPrefix is the key prefix used unless WithPrefix says otherwise.
const DefaultPrefix = "idem:"

// maxAttempts bounds how often completeWatched decides again after the key
// changed between its WATCH and its EXEC (released, expired, renewed
// concurrently).
const maxAttempts = 16

var (
	_ store.Store = (*Store)(nil)

	errNilClient = errors.New("nil redis client")
)

// Store is a store.Store kept in Redis. It is safe for concurrent use. A
// client passed to New stays the caller's: Close does not close it.
type Store struct {
	client goredis.UniversalClient
	prefix string
	now    func() time.Time
	log    *slog.Logger

	checkPolicy bool
	watched     int          // response size from which Complete keeps the response out of Lua
	noStage     bool         // large responses go straight to completeWatched (tests)
	policyState atomic.Int32 // 0 not checked, 1 checking, 2 done
	noSetGet    atomic.Bool  // the server rejected SET ... NX GET

	owned     bool // opened from a URL: Close closes client
	closeOnce sync.Once

	checkPersist bool
	persistState atomic.Int32 // as policyState, for CheckPersistence
	wait         waitOptions  // WithReplicas

	fps       atomic.Pointer[fpCache] // fingerprints of recent claims, from the first large Complete
	stageOnce sync.Once
	stageID   string // random, part of every staging key
	stageSeq  atomic.Uint64

	batch *coalesce.Batcher[op, opResult] // WithCoalescing(true) without WithReplicas
}

// Option configures a Store. An invalid value or a nil option is reported
// by New (an error matching store.ErrInvalid that names the option), never
// silently replaced.
type Option func(*options) error

type options struct {
	prefix      string
	now         func() time.Time
	log         *slog.Logger
	checkPolicy bool

	checkPersist bool
	wait         waitOptions
	coalesce     bool
}

// WithPrefix sets the prefix put before every key (default DefaultPrefix).
// Give each application or environment sharing a Redis its own prefix. A
// prefix with a Cluster hash tag ("{idem}:") puts every record in one slot,
// on one node: it still works, but no longer spreads the load. An empty
// prefix is allowed (keys are then stored as they are).
func WithPrefix(p string) Option {
	return func(o *options) error { o.prefix = p; return nil }
}

// WithClock sets the clock from which the times reported in records
// (LockedUntil, ExpiresAt) and the Fence of a claim of a new key are
// computed; default time.Now. Expiry itself, and whether a lease is live,
// is decided by Redis (PX, PTTL, TIME) on the server's clock. A nil clock
// is an error at New.
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return errors.New("WithClock(nil): pass a clock such as time.Now")
		}
		o.now = now
		return nil
	}
}

// WithLogger sets the logger for the maxmemory-policy warning (default
// slog.Default()). A nil logger is an error at New.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return errors.New("WithLogger(nil): pass a logger, or slog.New(slog.DiscardHandler) for none")
		}
		o.log = l
		return nil
	}
}

// WithEvictionCheck turns the first-use maxmemory-policy check on (the
// default) or off. Turn it off where CONFIG is disabled and the policy is
// known to be noeviction, or in tests that count commands.
func WithEvictionCheck(enabled bool) Option {
	return func(o *options) error { o.checkPolicy = enabled; return nil }
}

// New returns a Store that keeps its records through client: a *redis.Client,
// a Sentinel failover client, a *redis.ClusterClient or a *redis.Ring. New
// does no I/O; the first call that touches Redis also checks
// maxmemory-policy and persistence (see WithEvictionCheck and
// WithPersistenceCheck). A nil client or an invalid option is an error that
// matches store.ErrInvalid. The client stays the caller's: Close does not
// close it (a Store opened with store.Open owns its client).
func New(client goredis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redis: new: %w: %w", store.ErrInvalid, errNilClient)
	}
	o := options{prefix: DefaultPrefix, now: time.Now, log: slog.Default(), checkPolicy: true, checkPersist: true}
	if err := invalid.Apply(&o, opts); err != nil {
		return nil, fmt.Errorf("redis: new: %w", err)
	}
	if o.wait.n > 0 {
		if err := checkWaitClient(client, o.wait); err != nil {
			return nil, fmt.Errorf("redis: new: %w: %w", store.ErrInvalid, err)
		}
	}
	s := &Store{client: client, prefix: o.prefix, now: o.now, log: o.log, checkPolicy: o.checkPolicy,
		checkPersist: o.checkPersist, wait: o.wait, watched: watchedComplete}
	if o.coalesce && o.wait.n == 0 {
		s.batch = s.newBatcher()
	}
	return s, nil
}

// Close closes the client when the Store owns it (it was opened with
// store.Open from a URL) and otherwise does nothing: a client passed to New
// stays the caller's to close. It is safe to call more than once.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	var err error
	s.closeOnce.Do(func() {
		if cerr := s.client.Close(); cerr != nil {
			err = fmt.Errorf("redis: close: %w", cerr)
		}
	})
	return err
}

// Claim implements store.Store. A new key costs one command (SET NX GET
// PX lease+LapsedKept), and so does a key holding a completed record (a
// replay or a mismatch, decided from the value SET returned). A key holding
// a record in progress costs that command plus acquireScript, which judges
// the lease on the server's clock (PTTL) and, in one atomic step, renews the
// caller's own lease, takes over a lapsed one (Attempt+1 and a larger Fence,
// from the server's TIME) or reports the live record.
//
// A claim of a new key sets Attempt 1 and Fence max(1, now in µs) from the
// Store's clock (WithClock), which SET cannot read from the server; a
// takeover's Fence is at least the server's TIME and the Store's clock in
// µs, and always above the lapsed record's.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("redis: claim: %w", err)
	}
	if err := s.begin(ctx); err != nil {
		return store.Claim{}, fmt.Errorf("redis: claim: %w", err)
	}
	ms := millis(lease)
	now := s.now()
	at := now.UnixMilli() + ms
	fence := uint64(max(now.UnixMicro(), 1))
	rk, val := s.keyAndClaim(key, token, fingerprint, at, fence)
	px := ms + keptMillis

	v, set, err := s.claimCmd(ctx, rk, val, px)
	if err != nil {
		return store.Claim{}, s.fail(ctx, "claim", err)
	}
	if set {
		s.remember(rk, token, fingerprint)
		return store.Claim{Outcome: store.Acquired, Record: store.Record{
			Key:         key,
			Fingerprint: fingerprint,
			Status:      store.StatusInProgress,
			Token:       token,
			LockedUntil: time.UnixMilli(at),
			ExpiresAt:   time.UnixMilli(at),
			Attempt:     1,
			Fence:       fence,
		}}, nil
	}
	rec, err := decodeReply(key, v)
	if err != nil {
		return store.Claim{}, fmt.Errorf("redis: claim: key %q: %w", key, err)
	}
	if rec.Status == store.StatusCompleted {
		// Redis returned the value, so the completed record is live (PX
		// expires it on the server's clock): no now to compare.
		f := store.Classify(rec, fingerprint, token, time.Time{})
		return store.Claim{Outcome: f.Outcome, Record: rec}, nil
	}
	// A record in progress, live or lapsed (kept for LapsedKept): the
	// script decides on the server's clock, and writes what it decides.
	res, err := s.run(ctx, acquireScript, rk, val, px).Slice()
	if err != nil {
		return store.Claim{}, s.fail(ctx, "claim", err)
	}
	code, cur, err := acquireReply(res)
	if err != nil {
		return store.Claim{}, fmt.Errorf("redis: claim: key %q: %w", key, err)
	}
	rec, err = decodeReply(key, cur)
	if err != nil {
		return store.Claim{}, fmt.Errorf("redis: claim: key %q: %w", key, err)
	}
	if code != 0 {
		s.remember(rk, token, fingerprint)
		return store.Claim{Outcome: store.Acquired, Record: rec}, nil
	}
	// Live, and not the caller's to renew: the script renews an own lease.
	f := store.Classify(rec, fingerprint, token, time.Time{})
	if f.Write {
		return store.Claim{}, fmt.Errorf("redis: claim: key %q: the claim script left the caller's own lease unrenewed", key)
	}
	return store.Claim{Outcome: f.Outcome, Record: rec}, nil
}

// acquireReply reads acquireScript's reply: the code (0 live and not
// taken, 1 acquired, 2 taken over) and the value.
func acquireReply(res []any) (code int64, cur string, err error) {
	if len(res) == 0 {
		return 0, "", errors.New("empty reply from the claim script")
	}
	code, _ = res[0].(int64)
	if code == -1 {
		return 0, "", fmt.Errorf("%w: the claim script found no record", errCorrupt)
	}
	if len(res) != 2 || code < 0 || code > 2 {
		return 0, "", fmt.Errorf("unexpected reply %v from the claim script", res)
	}
	cur, ok := res[1].(string)
	if !ok {
		return 0, "", fmt.Errorf("unexpected reply %v from the claim script", res)
	}
	return code, cur, nil
}

// claimCmd is setNX, coalesced with other callers' commands when it can be.
func (s *Store) claimCmd(ctx context.Context, rk, val string, ms int64) (cur string, set bool, err error) {
	if !s.coalescing() || s.noSetGet.Load() {
		return s.setNX(ctx, rk, val, ms)
	}
	r, err := s.batch.Do(ctx, op{kind: opClaim, rk: rk, val: val, ms: ms})
	return r.cur, r.set, err
}

// setNX writes val under rk when rk is absent (set is true) and otherwise
// returns the value there, in one command.
func (s *Store) setNX(ctx context.Context, rk, val string, ms int64) (cur string, set bool, err error) {
	if s.waiting() {
		return s.setNXWait(ctx, rk, val, ms)
	}
	if !s.noSetGet.Load() {
		cmd := newSetNX(ctx, rk, val, ms)
		_ = s.client.Process(ctx, cmd)
		cur, err = cmd.Result()
		switch {
		case errors.Is(err, goredis.Nil):
			return "", true, nil
		case err == nil:
			return cur, false, nil
		case !isSyntaxError(err):
			return "", false, err
		}
		// Before Redis 7.0, NX and GET together are a syntax error and
		// nothing was written: use the script from now on.
		if s.noSetGet.CompareAndSwap(false, true) {
			s.log.Info("redis: the server rejects SET ... NX GET (Redis before 7.0?); claiming with a Lua script instead", "error", err.Error())
		}
	}
	cur, err = claimScript.Run(ctx, s.client, []string{rk}, val, ms).Text()
	switch {
	case errors.Is(err, goredis.Nil):
		return "", true, nil
	case err == nil:
		return cur, false, nil
	}
	return "", false, err
}

// Complete implements store.Store with one script run that checks the token
// and writes the completed record with its retention (PX); from 64 KiB the
// response is staged in the same round trip instead of passed to the script
// (see the package documentation). A retried Complete by the token that
// completed the key returns nil and leaves the first response and retention
// as they are.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("redis: complete: %w", err)
	}
	if err := s.begin(ctx); err != nil {
		return fmt.Errorf("redis: complete: %w", err)
	}
	ms := millis(retention)
	at := s.now().UnixMilli() + ms
	if response == nil {
		response = []byte{}
	}
	rk := s.prefix + key
	var (
		n   int64
		err error
	)
	if len(response) >= s.watched && !s.waiting() {
		// Large, and no WithReplicas to wait for (WAIT follows the script,
		// see run): keep the response out of Lua, in one round trip when
		// the staging works out, else in two.
		staged := false
		if !s.noStage {
			n, staged, err = s.completeStaged(ctx, rk, token, response, at, ms)
		}
		if !staged {
			n, err = s.completeWatched(ctx, rk, token, response, at, ms)
		}
	} else if s.coalescing() {
		var r opResult
		r, err = s.batch.Do(ctx, op{kind: opComplete, rk: rk, token: token, at: at, response: response, ms: ms})
		n = r.n
	} else {
		n, err = s.complete(ctx, rk, token, response, at, ms)
	}
	if err != nil {
		return s.fail(ctx, "complete", err)
	}
	s.forget(rk, token)
	switch n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("redis: complete: key %q: %w", key, store.ErrLeaseLost)
	}
	return fmt.Errorf("redis: complete: key %q: %w", key, errCorrupt)
}

// complete runs completeScript on rk: the command of newComplete, or with
// WithReplicas the script followed by WAIT (run).
func (s *Store) complete(ctx context.Context, rk string, token store.Token, response []byte, at, ms int64) (int64, error) {
	if s.waiting() {
		return s.run(ctx, completeScript, rk, string(token), encodeTime(at), response, ms).Int64()
	}
	return s.runComplete(ctx, rk, token, response, at, ms)
}

// watchedComplete is the response size from which Complete keeps the
// response out of Lua: it stages the completed value (completeStaged) or,
// when it cannot, checks and writes with WATCH … MULTI/EXEC
// (completeWatched), instead of the completion script. Any argument a
// script receives is copied into a Lua string, which for a 1 MiB response
// costs the server about 1.4 ms (INFO commandstats, Redis 7.0); a plain SET
// of a large argument takes the request's own buffer and costs
// microseconds. Above this size that saving outweighs the staging key's
// extra command (or the fallback's second round trip).
const watchedComplete = 64 << 10

// completeWatched does what completeScript does, with the same results (1
// done, 0 lease lost, -1 not a record), as an optimistic transaction: WATCH
// the key, GET it and its PTTL, check the token and the lease where the
// script would, and SET the
// completed value in MULTI/EXEC, which Redis aborts if the key changed (or
// expired) since the WATCH; then it decides again.
func (s *Store) completeWatched(ctx context.Context, rk string, token store.Token, response []byte, at, ms int64) (int64, error) {
	// A plain client sends WATCH, GET and PTTL in one round trip; a Cluster
	// (or Ring) client needs the key given to Watch to find its node, which
	// costs WATCH a round trip of its own. The PTTL tells a live lease from
	// a lapsed one kept for LapsedKept, as the scripts' live does.
	_, plain := s.client.(*goredis.Client)
	var keys []string
	if !plain {
		keys = []string{rk}
	}
	for range maxAttempts {
		var n int64
		err := s.client.Watch(ctx, func(tx *goredis.Tx) error {
			var cur string
			var err error
			var get *goredis.StringCmd
			var pttl *goredis.DurationCmd
			_, err = tx.Pipelined(ctx, func(p goredis.Pipeliner) error {
				if plain {
					p.Do(ctx, "watch", rk)
				}
				get = p.Get(ctx, rk)
				pttl = p.PTTL(ctx, rk)
				return nil
			})
			if err == nil || errors.Is(err, goredis.Nil) {
				cur, err = get.Result()
			}
			done := func(result int64) error {
				n = result
				if plain {
					// Watch armed by hand: go-redis does not know to
					// UNWATCH before the connection goes back to the pool.
					return tx.Unwatch(ctx).Err()
				}
				return nil
			}
			if errors.Is(err, goredis.Nil) {
				return done(0)
			}
			if err != nil {
				if plain {
					_ = tx.Unwatch(ctx).Err() // a broken connection is dropped anyway
				}
				return err
			}
			rec, err := decodeReply(rk, cur)
			switch {
			case err != nil:
				return done(-1)
			case rec.Token != token:
				return done(0)
			case rec.Status == store.StatusCompleted:
				return done(1) // a retried Complete: the first response and retention stay
			case !leaseLive(cur, pttl.Val(), s.now):
				return done(0) // lapsed, kept for its attempt count: not the token's any more
			}
			val := encode(statusCompleted, token, rec.Fingerprint, at, rec.Attempt, rec.Fence, response)
			_, err = tx.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.Set(ctx, rk, val, time.Duration(ms)*time.Millisecond)
				return nil
			})
			n = 1
			return err
		}, keys...)
		if errors.Is(err, goredis.TxFailedErr) {
			continue // the key changed between WATCH and EXEC: decide again
		}
		return n, err
	}
	return 0, fmt.Errorf("the key changed %d times while completing it", maxAttempts)
}

// remember notes, once a large Complete has made the Store keep them, the
// fingerprint of a claim token acquired, for completeStaged.
func (s *Store) remember(rk string, token store.Token, fp string) {
	if c := s.fps.Load(); c != nil {
		c.put(rk, token, fp)
	}
}

// forget drops what remember noted of token's claim of rk.
func (s *Store) forget(rk string, token store.Token) {
	if c := s.fps.Load(); c != nil {
		c.drop(rk, token)
	}
}

// Release implements store.Store with one script run that deletes the key
// only when it holds token's record in progress with a live lease (a lapsed
// one stays kept).
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("redis: release: %w", err)
	}
	if err := s.begin(ctx); err != nil {
		return fmt.Errorf("redis: release: %w", err)
	}
	rk := s.prefix + key
	if err := releaseScript.Run(ctx, s.client, []string{rk}, string(token)).Err(); err != nil {
		return s.fail(ctx, "release", err)
	}
	s.forget(rk, token)
	return nil
}

// Renew implements store.Store with one script run (renewScript) that
// extends the lease only when the key holds token's record in progress and
// its lease is live on the server's clock; otherwise it writes nothing and
// Renew returns an error wrapping store.ErrLeaseLost. It keeps Attempt and
// Fence. With WithReplicas, a renewal fewer replicas acknowledged fails
// with ErrNotReplicated.
func (s *Store) Renew(ctx context.Context, key string, token store.Token, lease time.Duration) error {
	if err := store.CheckRenew(key, token, lease); err != nil {
		return fmt.Errorf("redis: renew: %w", err)
	}
	if err := s.begin(ctx); err != nil {
		return fmt.Errorf("redis: renew: %w", err)
	}
	ms := millis(lease)
	at := s.now().UnixMilli() + ms
	n, err := s.run(ctx, renewScript, s.prefix+key, string(token), encodeTime(at), ms+keptMillis).Int64()
	if err != nil {
		return s.fail(ctx, "renew", err)
	}
	switch n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("redis: renew: key %q: %w", key, store.ErrLeaseLost)
	}
	return fmt.Errorf("redis: renew: key %q: %w", key, errCorrupt)
}

// Get implements store.Store with GET and PTTL in one MULTI/EXEC (one
// round trip): a record in progress whose lease lapsed, kept for
// store.LapsedKept, is reported absent (ErrNotFound).
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", err)
	}
	if err := s.begin(ctx); err != nil {
		return store.Record{}, fmt.Errorf("redis: get: %w", err)
	}
	rk := s.prefix + key
	var get *goredis.StringCmd
	var pttl *goredis.DurationCmd
	_, err := s.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		get = p.Get(ctx, rk)
		pttl = p.PTTL(ctx, rk)
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return store.Record{}, s.fail(ctx, "get", err)
	}
	v, err := get.Result()
	if errors.Is(err, goredis.Nil) {
		return store.Record{}, fmt.Errorf("redis: get: key %q: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return store.Record{}, s.fail(ctx, "get", err)
	}
	rec, err := decodeReply(key, v)
	if err != nil {
		return store.Record{}, fmt.Errorf("redis: get: key %q: %w", key, err)
	}
	if !leaseLive(v, pttl.Val(), s.now) {
		// Lapsed, kept only for its attempt count: absent, as ever.
		return store.Record{}, fmt.Errorf("redis: get: key %q: %w", key, store.ErrNotFound)
	}
	return rec, nil
}

// leaseLive reports what the scripts' live does, for the value v that
// Redis holds with the remaining time pttl (go-redis' PTTL reply: -1 or -2
// as nanoseconds for no expiry or no key): whether v, if it is a version-2
// record in progress, still holds its lease, which ends LapsedKept before
// Redis deletes the record. Every other value is live while it exists.
//
// In the lease's last millisecond (pttl equal to LapsedKept) the lease
// deadline in the value decides against now, the Store's clock, as the
// scripts' live decides against the server's TIME (see luaPrelude).
func leaseLive(v string, pttl time.Duration, now func() time.Time) bool {
	if len(v) < headerSize || v[0] != codecVersion || v[offStatus] != statusInProgress {
		return true
	}
	if pttl != store.LapsedKept {
		return pttl < 0 || pttl > store.LapsedKept
	}
	return int64(bigEndian(v[offTime:offAttempt]))*1000 > now().UnixMicro()
}

// begin is the common start of every call that touches Redis.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.client == nil {
		return errNilClient
	}
	s.checkPolicyOnce(ctx)
	s.checkPersistenceOnce(ctx)
	return nil
}

// fail wraps a driver error for op. A redis.Nil never escapes (it would read
// as "not found"), and when ctx is done its error is wrapped too, so callers
// can match context.Canceled whichever error the driver reported.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if errors.Is(err, goredis.Nil) {
		err = errors.New("unexpected nil reply")
	}
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(dl) {
		// The client's read deadline (ContextTimeoutEnabled) can fire a
		// moment before the context's own timer marks it done.
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("redis: %s: %w (%w)", op, err, cerr)
	}
	return fmt.Errorf("redis: %s: %w", op, err)
}

// millis rounds d (positive) up to whole milliseconds, as PX takes them.
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// isSyntaxError reports a server-side "ERR syntax error" reply.
func isSyntaxError(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) && strings.Contains(strings.ToLower(re.Error()), "syntax error")
}
