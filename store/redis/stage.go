package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// A large completion is staged: the fully encoded completed value is written
// with a plain SET under a staging key in the record's hash slot, and in the
// same pipeline commitScript checks the record and RENAMEs the staging key
// over it. That is one round trip (WATCH … MULTI/EXEC takes two), and the
// response never enters Lua (a plain SET keeps the request's own buffer).
//
// Building the completed value needs the record's fingerprint, which
// Complete is not given: the Store remembers the fingerprint of its own
// recent Acquired claims (fpCache). That is only a guess. The script
// compares the staged header with the one it would write itself from the
// live record, so a wrong guess, a forgotten claim, a staging key that
// expired or could not be written all end in the script deleting the
// staging key and answering stageRetry, after which Complete falls back to
// completeWatched. Correctness never rests on the cache.

// stageTTL is the expiry of a staging key. The script consumes it in the
// same pipeline, microseconds later; the TTL only bounds how long one stays
// behind when the connection fails between the two commands.
const stageTTL = 10 * time.Second

// stageRetry is commitScript's answer when the staged value is not the one
// to store (or is missing): nothing was written, and the staging key is gone.
const stageRetry = -2

// commitScript stores a staged completion. KEYS[1] is the record, KEYS[2]
// the staging key (same slot), holding the completed value Complete built:
// the header the completion script would write, then the response. ARGV[1]
// is the token, ARGV[2] the 8-byte time field, ARGV[3] the retention in
// milliseconds. It checks the record exactly as completeScript does, with
// the same answers (1 done or already completed by this token, 0 absent,
// another token's or a lapsed lease, -1 not a record), and in every one of those
// cases but a fresh completion deletes the staging key. For a record in
// progress of this token it compares the staged value's header with the
// header completeScript would build (version, completed, token and
// fingerprint lengths, time, token, fingerprint): equal, it RENAMEs the
// staging key over the record and sets the retention, so the record ends up
// byte for byte what completeScript writes; different (the fingerprint
// guessed wrong) or missing, it deletes the staging key and returns -2.
// Only the header of the staged value is read (GETRANGE), never the
// response.
//
// The staged value carries zeros where the record's Attempt and Fence go
// (Complete does not know them); the script compares everything else and,
// after the RENAME, writes the record's own Attempt and Fence over them
// with SETRANGE (12 bytes, in place). A version-1 record in progress, or a
// lapsed lease, is never staged over: the first answers -2 (Complete then
// takes completeWatched), the second 0.
var commitScript = script(`
local cur = redis.call('GET', KEYS[1])
local function drop(r) redis.call('DEL', KEYS[2]) return r end
if not cur then return drop(0) end
local h = hdr(string.byte(cur, 1))
if not h or #cur < h then return drop(-1) end
local tok = ARGV[1]
local n = string.byte(cur, 3)
if n ~= #tok or string.sub(cur, h + 1, h + n) ~= tok then return drop(0) end
local st = string.byte(cur, 2)
if st ~= 1 and st ~= 2 then return drop(-1) end
if st == 2 then return drop(1) end
local m = string.byte(cur, 4) * 256 + string.byte(cur, 5)
if #cur ~= h + n + m then return drop(-1) end
if not live(cur) then return drop(0) end
if h ~= 25 then return drop(-2) end
local head = '\2\2' .. string.sub(cur, 3, 5) .. ARGV[2] .. string.rep('\0', 12) .. string.sub(cur, 26)
if redis.call('GETRANGE', KEYS[2], 0, #head - 1) ~= head then return drop(-2) end
redis.call('RENAME', KEYS[2], KEYS[1])
redis.call('SETRANGE', KEYS[1], 13, string.sub(cur, 14, 25))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// stagingKey returns a key for staging rk's completed value that hashes to
// rk's Cluster slot (and Ring shard): rk followed by a suffix when rk has a
// hash tag, else prefix{rk} and a suffix, so that it starts with the
// Store's prefix as every key it writes does. ok is false when neither is
// possible (rk has an unmatched brace, or a "}" but no "{"): Complete then
// takes completeWatched.
func (s *Store) stagingKey(rk string) (key string, ok bool) {
	suffix := s.stageSuffix()
	if i := strings.IndexByte(rk, '{'); i >= 0 {
		if j := strings.IndexByte(rk[i+1:], '}'); j > 0 {
			return rk + suffix, true // the tag stays the first {…}
		}
		return "", false // hashed whole: no other key shares its slot for sure
	}
	if strings.IndexByte(rk, '}') >= 0 {
		return "", false
	}
	// rk has no braces, so the prefix has none either: the tag is rk.
	return s.prefix + "{" + rk + "}" + suffix, true
}

// stageSuffix returns a suffix no other staging of this Store (or, with its
// random id, of any other) uses, so that two Completes of one key, retries
// racing each other, never stage under one name.
func (s *Store) stageSuffix() string {
	s.stageOnce.Do(func() { s.stageID = rand.Text()[:10] })
	return ":stage:" + s.stageID + ":" + strconv.FormatUint(s.stageSeq.Add(1), 36)
}

// completeStaged completes rk by staging (see commitScript) when the Store
// remembers the fingerprint token claimed rk with. ok false means it did
// nothing lasting (no staging key, or the script deleted it) and the caller
// must complete another way; otherwise n is completeScript's answer.
func (s *Store) completeStaged(ctx context.Context, rk string, token store.Token, response []byte, at, ms int64) (n int64, ok bool, err error) {
	fps := s.fps.Load()
	if fps == nil {
		// The first large completion: from now on Claim remembers.
		s.fps.CompareAndSwap(nil, newFPCache())
		return 0, false, nil
	}
	fp, known := fps.get(rk, token)
	if !known {
		return 0, false, nil
	}
	sk, ok := s.stagingKey(rk)
	if !ok {
		return 0, false, nil
	}
	val := encode(statusCompleted, token, fp, at, 0, 0, response) // Attempt and Fence: the script's
	keys := []string{rk, sk}
	args := []any{string(token), encodeTime(at), ms}
	var cmd *goredis.Cmd
	_, _ = s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, sk, val, stageTTL)
		cmd = commitScript.EvalSha(ctx, p, keys, args...)
		return nil
	})
	// The SET's own failure needs no look: the script then finds no staged
	// value and answers stageRetry.
	n, err = cmd.Int64()
	if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		n, err = commitScript.Eval(ctx, s.client, keys, args...).Int64() // loads it
	}
	var reply goredis.Error
	switch {
	case err == nil && n == stageRetry:
		return 0, false, nil
	case err != nil && errors.As(err, &reply):
		// The server refused the script (a slot being migrated, an ACL
		// that denies the staging key, ...): it wrote nothing, and a
		// staging key it left expires.
		return 0, false, nil
	}
	return n, true, err
}

// fpSlots is the number of claims an fpCache remembers at most (fewer when
// keys collide). A Complete comes shortly after its Claim, so a cache
// that holds the last few hundred in flight serves nearly all of them.
const fpSlots = 1024

// fpCache remembers, per record key, the token and fingerprint of the
// Store's latest Acquired claim: direct-mapped, a mutex per slot, a newer
// claim overwriting an older one in its slot. It allocates nothing per
// claim (the strings are the claim's own).
type fpCache struct {
	seed  maphash.Seed
	slots [fpSlots]fpSlot
}

type fpSlot struct {
	mu    sync.Mutex
	rk    string
	token store.Token
	fp    string
}

func newFPCache() *fpCache { return &fpCache{seed: maphash.MakeSeed()} }

func (c *fpCache) slot(rk string) *fpSlot {
	return &c.slots[maphash.String(c.seed, rk)%fpSlots]
}

// put remembers that token holds rk with fingerprint fp.
func (c *fpCache) put(rk string, token store.Token, fp string) {
	sl := c.slot(rk)
	sl.mu.Lock()
	sl.rk, sl.token, sl.fp = rk, token, fp
	sl.mu.Unlock()
}

// get returns the fingerprint token claimed rk with, if remembered.
func (c *fpCache) get(rk string, token store.Token) (string, bool) {
	sl := c.slot(rk)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.rk != rk || sl.token != token {
		return "", false
	}
	return sl.fp, true
}

// drop forgets token's claim of rk (completed or released).
func (c *fpCache) drop(rk string, token store.Token) {
	sl := c.slot(rk)
	sl.mu.Lock()
	if sl.rk == rk && sl.token == token {
		sl.rk, sl.token, sl.fp = "", "", ""
	}
	sl.mu.Unlock()
}
