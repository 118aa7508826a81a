package redis

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
)

// mustNew is New for tests: a construction error fails tb at once.
func mustNew(tb testing.TB, c goredis.UniversalClient, opts ...Option) *Store {
	tb.Helper()
	s, err := New(c, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// MustNew exports mustNew to the redis_test package.
var MustNew = mustNew

// WatchEveryComplete makes s complete every record, whatever the response
// size, with WATCH … MULTI/EXEC instead of the completion script.
func WatchEveryComplete(s *Store) *Store {
	s.watched = 0
	s.noStage = true
	return s
}

// StageEveryComplete makes s complete every record, whatever the response
// size, by staging the completed value and renaming it over the record
// (completeStaged), falling back to WATCH … MULTI/EXEC only when that path
// must.
func StageEveryComplete(s *Store) *Store {
	s.watched = 0
	s.fps.CompareAndSwap(nil, newFPCache())
	return s
}

// RememberFingerprint makes s believe token claimed key with fingerprint fp
// (right or wrong), as its own Claim would have noted.
func RememberFingerprint(s *Store, key string, token store.Token, fp string) {
	s.fps.CompareAndSwap(nil, newFPCache())
	s.fps.Load().put(s.prefix+key, token, fp)
}

// CommitScript is the script of a staged completion, for tests that load it.
var CommitScript = commitScript

// StageTTL is the expiry of a staging key.
const StageTTL = stageTTL

// CoalesceStats reports how many batches of two or more calls s has sent
// and how many calls they held (0, 0 without coalescing).
func CoalesceStats(s *Store) (batches, calls int64) {
	if s.batch == nil {
		return 0, 0
	}
	return s.batch.Stats()
}

// Coalescing reports whether s sends its claims and small completions
// through its batcher (WithCoalescing(true), without WithReplicas).
func Coalescing(s *Store) bool { return s.coalescing() }
