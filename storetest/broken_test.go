package storetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/storetest"
)

// The suite is only worth something if it fails broken stores. Each variant
// below is a small map store with one deliberate defect; the suite runs
// against it in a child process (this test binary, re-run with
// -test.run=TestBrokenStoreHelper and STORETEST_BROKEN set), so a real
// *testing.T records the failures, and the parent checks that the child
// failed exactly where the defect should be caught.
var variants = []struct {
	name     string
	wantFail []string // subtests that must fail
	alsoFail []string // subtests that may fail too, for other rules the defect breaks; no other may
	wantOut  string   // and text the output must contain
	race     bool     // the defect shows only under the race detector
	// crashOut, when the output contains it, also counts as caught: the Go
	// runtime stopped the run for the defect before a test could fail.
	crashOut string
}{
	{name: "correct"},
	{name: "read-then-write", wantFail: []string{"Claim/ConcurrentSameKey"}, alsoFail: []string{"Claim/ConcurrentAfterRelease", "Claim/ConcurrentLapsedLease", "Claim/ConcurrentRetentionOver", "Claim/ConcurrentWithComplete", "Attempts/ConcurrentTakeover"}},
	{name: "complete-ignores-token", wantFail: []string{"Complete/OtherTokenInProgress", "Complete/OtherTokenCompleted", "Fencing/CompleteAfterTakeover", "Model/RandomSequences"}, alsoFail: []string{"Fencing/StaleCompleteRacesTakeover", "Strings/TokensDistinct", "Attempts/Takeover"}},
	{name: "release-deletes-anything", wantFail: []string{"Release/OtherToken", "Release/Completed", "Fencing/ReleaseAfterTakeover", "Model/RandomSequences"}, alsoFail: []string{"Fencing/StaleReleaseRacesTakeover", "Strings/TokensDistinct", "Attempts/ReleaseLeavesLapsedLease"}},
	{name: "ignores-expiry", wantFail: []string{"Claim/LeaseLapsedTakeover", "Get/LapsedLease", "Get/RetentionOver", "Fencing/CompleteAfterTakeover", "Model/RandomSequences"}, alsoFail: []string{"Claim/ConcurrentLapsedLease", "Claim/ConcurrentRetentionOver", "Claim/RetentionOver", "Expiry/Boundary", "Expiry/RetentionLivesUntilExpiresAt", "Expiry/SubMillisecondDurations", "Fencing/ClaimAfterTakeover", "Fencing/ReleaseAfterTakeover", "Fencing/StaleCompleteRacesTakeover", "Fencing/StaleReleaseRacesTakeover", "Transactor/AcquiredCommitsInProgress", "Attempts/ConcurrentTakeover", "Attempts/OwnLapsedLeaseCounts", "Attempts/PurgeKeepsLapsed", "Attempts/ReleaseLeavesLapsedLease", "Attempts/ReleaseStartsAgain", "Attempts/RetentionOverStartsAgain", "Attempts/Takeover", "Purger/RemovesOnlyExpired", "Renew/AfterLapse", "Renew/AfterTakeover"}},
	{name: "ignores-fingerprint", wantFail: []string{"Claim/MismatchInProgress", "Claim/MismatchCompleted", "Model/RandomSequences"}, alsoFail: []string{"Claim/EmptyFingerprint", "Strings/FingerprintsDistinct"}},
	{name: "ignores-context", wantFail: []string{"Errors/CancelledContext", "Errors/ExpiredDeadline"}},
	{name: "shares-response", wantFail: []string{"Complete/ResponseIsCopied"}},
	{name: "no-validation", wantFail: []string{"Errors/InvalidArguments"}},
	{name: "no-renewal", wantFail: []string{"Claim/Reentrant", "Expiry/RenewalKeepsLease"}, alsoFail: []string{"Model/RandomSequences", "Purger/RenewedLeaseKept"}},
	{name: "release-completes-nothing", wantFail: []string{"Release/Held", "Claim/AfterRelease"}, alsoFail: []string{"Claim/ConcurrentAfterRelease", "Complete/AfterRelease", "Get/ConcurrentWithWrites", "Model/RandomSequences", "Release/Retried", "Attempts/ReleaseStartsAgain", "Renew/AfterRelease", "Renew/ConcurrentWithRelease"}},
	{name: "takeover-read-then-write", wantFail: []string{"Claim/ConcurrentLapsedLease"}, alsoFail: []string{"Attempts/ConcurrentTakeover"}},
	{name: "expired-read-then-write", wantFail: []string{"Claim/ConcurrentRetentionOver"}},
	{name: "released-read-then-write", wantFail: []string{"Claim/ConcurrentAfterRelease"}},
	{name: "complete-checks-then-writes", wantFail: []string{"Fencing/StaleCompleteRacesTakeover"}},
	{name: "release-checks-then-deletes", wantFail: []string{"Fencing/StaleReleaseRacesTakeover"}, alsoFail: []string{"Attempts/ReleaseLeavesLapsedLease", "Model/RandomSequences"}},
	{name: "get-unlocked", wantFail: []string{"Get/ConcurrentWithWrites"}, race: true, crashOut: "fatal error: concurrent map read and map write"},
	{name: "jitter"}, // correct, but reports deadlines up to 2ms off: must pass
	{name: "renewal-is-jitter", wantFail: []string{"Claim/Reentrant", "Expiry/RenewalKeepsLease"}, alsoFail: []string{"Model/RandomSequences", "Purger/RenewedLeaseKept"}},
	{name: "keys-fold-case", wantFail: []string{"Strings/KeysCase"}, alsoFail: []string{"Claim/KeysIndependent", "Strings/KeysMaxLength", "Strings/KeysUnicodeForms"}},
	{name: "keys-trim-space", wantFail: []string{"Strings/KeysSpaces"}},
	{name: "keys-normalize", wantFail: []string{"Strings/KeysUnicodeForms"}},
	{name: "keys-truncate", wantFail: []string{"Strings/KeysMaxLength"}},
	{name: "keys-prefix-255", wantFail: []string{"Strings/KeysLongPrefix"}, alsoFail: []string{"Strings/KeysMaxLength"}},
	{name: "fingerprint-prefix-255", wantFail: []string{"Strings/FingerprintsDistinct"}},
	{name: "tokens-fold-case", wantFail: []string{"Strings/TokensDistinct"}},
	{name: "responses-as-text", wantFail: []string{"Strings/ResponsesEveryByte"}, alsoFail: []string{"Complete/Responses", "Strings/ResponseSeveralMiB"}},
	{name: "responses-capped", wantFail: []string{"Strings/ResponseSeveralMiB"}},
	{name: "tx-blocks-ignoring-context", wantFail: []string{"Transactor/BlockedClaimHonoursContext"}},
	{name: "tx-join-any", wantFail: []string{"Transactor/JoinsOnlyOwnTransactions"}},
	{name: "effect-outside-tx", wantFail: []string{"Transactor/EffectRollsBackWithKey"}, alsoFail: []string{"Transactor/LeaseLapsesInside"}},
	{name: "tx-drops-uncompleted", wantFail: []string{"Transactor/AcquiredCommitsInProgress"}},
	{name: "complete-lapsed-noop", wantFail: []string{"Transactor/LeaseLapsesInside", "Complete/AfterLapse"}, alsoFail: []string{"Fencing/StaleCompleteRacesTakeover", "Model/RandomSequences"}},
	{name: "complete-overwrites", wantFail: []string{"Complete/RetriedKeepsFirst", "Model/RandomSequences"}},
	{name: "durations-truncated-ms", wantFail: []string{"Expiry/SubMillisecondDurations"}},
	{name: "long-durations-as-unix-time", wantFail: []string{"Expiry/LongDurations"}},
	{name: "get-first-mib", wantFail: []string{"Strings/ResponseSeveralMiB"}},
	{name: "ignores-deadline", wantFail: []string{"Errors/ExpiredDeadline"}},
	{name: "get-torn", wantFail: []string{"Get/ConcurrentWithWrites"}},
	{name: "replay-no-expiry", wantFail: []string{"Claim/CompletedReplay"}},
	{name: "replay-expiry-differs", wantFail: []string{"Claim/CompletedReplay"}},
	{name: "text-unchecked", wantFail: []string{"Errors/InvalidArguments"}},
	{name: "complete-release-key-unchecked", wantFail: []string{"Errors/InvalidArguments"}},
	{name: "tokens-prefix-64", wantFail: []string{"Strings/TokensDistinct"}},
	{name: "purge-ignores-renewal", wantFail: []string{"Purger/RenewedLeaseKept"}},
	{name: "tx-get-outside", wantFail: []string{"Transactor/GetInsideTransaction"}},
	{name: "tx-reruns-fn", wantFail: []string{"Transactor/RunsFnOnce"}},
	{name: "expiry-off-by-one", wantFail: []string{"Expiry/Boundary"}},
	{name: "renew-claims", wantFail: []string{"Renew/Absent", "Renew/AfterRelease", "Renew/AfterLapse", "Renew/ConcurrentWithRelease", "Model/RandomSequences"}},
	{name: "renew-revives-lapsed", wantFail: []string{"Renew/AfterLapse"}, alsoFail: []string{"Model/RandomSequences"}},
	{name: "renew-completed", wantFail: []string{"Renew/Completed"}, alsoFail: []string{"Model/RandomSequences"}},
	{name: "renew-ignores-token", wantFail: []string{"Renew/OtherToken", "Renew/AfterTakeover"}, alsoFail: []string{"Model/RandomSequences"}},
	{name: "renew-checks-then-writes", wantFail: []string{"Renew/ConcurrentWithRelease"}},
	{name: "attempt-not-counted", wantFail: []string{"Attempts/Takeover", "Attempts/OwnLapsedLeaseCounts", "Attempts/ReleaseLeavesLapsedLease", "Attempts/PurgeKeepsLapsed", "Attempts/ConcurrentTakeover", "Model/RandomSequences", "Attempts/ReleaseStartsAgain", "Purger/RemovesOnlyExpired"}},
	{name: "fence-not-grown", wantFail: []string{"Attempts/Takeover", "Attempts/OwnLapsedLeaseCounts", "Attempts/RetentionOverStartsAgain"}, alsoFail: []string{"Attempts/ReleaseStartsAgain"}},
	{name: "purge-lapsed-now", wantFail: []string{"Attempts/PurgeKeepsLapsed", "Purger/RemovesOnlyExpired", "Purger/RenewedLeaseKept"}},
	{name: "release-deletes-lapsed", wantFail: []string{"Attempts/ReleaseLeavesLapsedLease"}, alsoFail: []string{"Model/RandomSequences", "Fencing/StaleReleaseRacesTakeover"}},
	{name: "deadlock", wantOut: "deadlocked: still running"},
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if v.race && !raceEnabled {
				t.Skip("this defect is caught by the race detector: run with -race")
			}
			t.Parallel()
			args := []string{"-test.run=^TestBrokenStoreHelper$", "-test.v", "-test.count=1", "-test.timeout=2m"}
			if skip := skipSlow(v.wantFail, v.alsoFail); skip != "" && len(v.wantFail) > 0 {
				args = append(args, "-test.skip="+skip)
			}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "STORETEST_BROKEN="+v.name)
			out, err := cmd.CombinedOutput()
			if len(v.wantFail) == 0 && v.wantOut == "" {
				if err != nil {
					t.Fatalf("the suite failed the correct %q store: %v\n%s", v.name, err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("the suite passed the %q store; it must fail it\n%s", v.name, tail(out))
			}
			if v.crashOut != "" && bytes.Contains(out, []byte(v.crashOut)) && bytes.Contains(out, []byte("storetest.getConcurrentWithWrites")) {
				return // the runtime caught it inside the suite's own case
			}
			for _, sub := range v.wantFail {
				if !bytes.Contains(out, []byte("--- FAIL: TestBrokenStoreHelper/"+sub+" ")) {
					t.Errorf("the %q store did not fail %s\n%s", v.name, sub, tail(out))
				}
			}
			// And nothing else: each defect is caught by the subtests
			// whose rules it breaks.
			if len(v.wantFail) > 0 {
				for _, sub := range failedCases(out) {
					if !slices.Contains(v.wantFail, sub) && !slices.Contains(v.alsoFail, sub) {
						t.Errorf("the %q store also failed %s, which it should pass\n%s", v.name, sub, tail(out))
					}
				}
			}
			if v.wantOut != "" && !bytes.Contains(out, []byte(v.wantOut)) {
				t.Errorf("output for the %q store lacks %q\n%s", v.name, v.wantOut, tail(out))
			}
		})
	}
}

// slowCases are the cases that take most of a run of the suite on the map
// store (racing goroutines, a 4 MiB response, timeouts waited out). A
// variant meant to fail skips those it is not meant to fail, which keeps
// this test quick; the correct variants run every case.
var slowCases = []string{"Get/ConcurrentWithWrites", "Strings/ResponseSeveralMiB", "Transactor/BlockedClaimHonoursContext"}

// skipSlow returns a -test.skip pattern for the slow cases in neither list.
func skipSlow(want, also []string) string {
	var groups, cases []string
	for _, c := range slowCases {
		if slices.Contains(want, c) || slices.Contains(also, c) {
			continue
		}
		g, name, _ := strings.Cut(c, "/")
		groups, cases = append(groups, g), append(cases, name)
	}
	if len(cases) == 0 {
		return ""
	}
	// -test.skip splits at slashes: this skips every pairing of a group
	// and a case listed, and the suite has no others with these names.
	return "^TestBrokenStoreHelper$/^(" + strings.Join(groups, "|") + ")$/^(" + strings.Join(cases, "|") + ")$"
}

// failedCases returns the Group/Case subtests the output reports failed.
func failedCases(out []byte) []string {
	var cases []string
	for _, l := range strings.Split(string(out), "\n") {
		_, rest, ok := strings.Cut(l, "--- FAIL: TestBrokenStoreHelper/")
		name, _, _ := strings.Cut(rest, " ")
		if ok && strings.Count(name, "/") == 1 {
			cases = append(cases, name)
		}
	}
	return cases
}

func tail(out []byte) string {
	lines := strings.Split(string(out), "\n")
	var fails []string
	for _, l := range lines {
		if strings.Contains(l, "--- FAIL") || strings.Contains(l, "panic:") {
			fails = append(fails, l)
		}
	}
	return strings.Join(fails, "\n")
}

// TestBrokenStoreHelper is the child process of TestSuiteCatchesBrokenStores.
func TestBrokenStoreHelper(t *testing.T) {
	variant := os.Getenv("STORETEST_BROKEN")
	if variant == "" {
		t.Skip("runs only as the child process of TestSuiteCatchesBrokenStores")
	}
	h := storetest.Harness{New: func(t *testing.T) storetest.Subject {
		clock := storetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		s := newMapStore(variant, clock.Now)
		return storetest.Subject{Store: s, Clock: clock, Effect: s.effect, CountEffects: s.countEffects}
	}}
	if variant == "deadlock" {
		h.Timeout = time.Second
	}
	storetest.Run(t, h)
}

// mapStore is a deliberately simple store: one map, one mutex. With
// variant "correct" it follows the contract; every other variant breaks one
// rule.
type mapStore struct {
	variant string
	now     func() time.Time
	mu      sync.Mutex
	m       map[string]store.Record
	purgeAt map[string]time.Time // the deadline Purge goes by (ExpiresAt, but for purge-ignores-renewal)
	effects map[string]int       // the caller's writes made through InTx (see brokentx_test.go)
	sem     chan struct{}        // the write lock, held by an InTx; other writes wait until it is free
}

func newMapStore(variant string, now func() time.Time) *mapStore {
	return &mapStore{variant: variant, now: now, m: map[string]store.Record{}, purgeAt: map[string]time.Time{}, effects: map[string]int{}, sem: make(chan struct{}, 1)}
}

func (s *mapStore) broken(v string) bool { return s.variant == v }

// check returns the error of a call's argument check, or of its context;
// claim says whether the call is a Claim.
func (s *mapStore) check(ctx context.Context, err error, claim bool) error {
	if err != nil && !s.broken("no-validation") {
		return err
	}
	switch {
	case s.broken("ignores-context"):
		return nil
	case s.broken("ignores-deadline") && !claim && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil
	}
	return ctx.Err()
}

// lax returns s with every NUL byte and invalid UTF-8 sequence replaced, so
// that a check of it sees only its length: a store that checks no more.
func lax(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "?"), "\x00", "?")
}

// laxTok is tok as the text-unchecked variant checks it.
func (s *mapStore) laxTok(tok store.Token) store.Token {
	if s.broken("text-unchecked") {
		return store.Token(lax(string(tok)))
	}
	return tok
}

// laxKey is key as Complete and Release of complete-release-key-unchecked
// check it: only that it is not empty.
func (s *mapStore) laxKey(key string) string {
	if s.broken("complete-release-key-unchecked") && key != "" {
		return "k"
	}
	return key
}

// until is when a lease or retention of d that begins now ends, as the
// variant reads d.
func (s *mapStore) until(d time.Duration) time.Time {
	switch {
	case s.broken("durations-truncated-ms"):
		d = d.Truncate(time.Millisecond)
	case s.broken("long-durations-as-unix-time") && d > 30*24*time.Hour:
		return time.Unix(int64(d/time.Second), 0) // memcached's rule
	}
	return s.now().Add(d)
}

// live returns the key's record if it is live. The caller holds s.mu.
func (s *mapStore) live(key string) (store.Record, bool) {
	r, ok := s.m[key]
	if !ok || s.broken("ignores-expiry") {
		return r, ok
	}
	if s.broken("expiry-off-by-one") && !r.ExpiresAt.Before(s.now()) || r.ExpiresAt.After(s.now()) {
		return r, true
	}
	return store.Record{}, false
}

func (s *mapStore) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	checkFP := fp
	if s.broken("text-unchecked") {
		checkFP = lax(fp)
	}
	if err := s.check(ctx, store.CheckClaim(key, checkFP, s.laxTok(tok), lease), true); err != nil {
		return store.Claim{}, err
	}
	tok = s.tok(tok)
	if s.broken("deadlock") {
		select {} // blocks forever, ignoring ctx
	}
	if err := s.enter(ctx); err != nil {
		return store.Claim{}, err
	}
	s.mu.Lock()
	r, ok := s.live(s.mkey(key))
	raw, exists := s.m[s.mkey(key)]
	dead := exists && !ok
	if s.broken("read-then-write") ||
		dead && raw.Status == store.StatusInProgress && s.broken("takeover-read-then-write") ||
		dead && raw.Status == store.StatusCompleted && s.broken("expired-read-then-write") ||
		dead && raw.Status == 0 && s.broken("released-read-then-write") {
		s.window()
	}
	defer s.mu.Unlock()
	sameFP := s.sameFP(r.Fingerprint, fp) || s.broken("ignores-fingerprint")
	switch {
	case !ok, r.Status == store.StatusInProgress && s.sameTok(r.Token, tok) && sameFP:
		if ok && (s.broken("no-renewal") || s.broken("renewal-is-jitter")) {
			return store.Claim{Outcome: store.Acquired, Record: s.out(r)}, nil
		}
		until := s.until(lease)
		if !ok || !s.broken("purge-ignores-renewal") {
			s.purgeAt[s.mkey(key)] = until
		}
		attempt, fence := r.Attempt, r.Fence
		if !ok {
			attempt, fence = s.successor(raw, exists && raw.Status != 0, tok)
		}
		r = store.Record{Key: key, Fingerprint: fp, Status: store.StatusInProgress, Token: tok, LockedUntil: until, ExpiresAt: until, Attempt: attempt, Fence: fence}
		s.m[s.mkey(key)] = r
		return store.Claim{Outcome: store.Acquired, Record: s.out(r)}, nil
	case !sameFP:
		return store.Claim{Outcome: store.Mismatch, Record: s.out(r)}, nil
	case r.Status == store.StatusCompleted:
		switch {
		case s.broken("replay-no-expiry"):
			r.ExpiresAt = time.Time{}
		case s.broken("replay-expiry-differs"):
			r.ExpiresAt = r.ExpiresAt.Add(-time.Second) // a cached copy, a second stale
		}
		return store.Claim{Outcome: store.Completed, Record: s.out(r)}, nil
	}
	return store.Claim{Outcome: store.InProgress, Record: s.out(r)}, nil
}

// window opens a gap between a read and the write that depends on it, as a
// store does that reads, decides and writes in separate steps. The caller
// holds s.mu, and holds it again afterwards.
func (s *mapStore) window() {
	s.mu.Unlock()
	for range 3 {
		runtime.Gosched()
	}
	s.mu.Lock()
}

// out returns the record as the store reports it: a copy of the response,
// and for the jitter variants the deadlines a store derives from a TTL.
func (s *mapStore) out(r store.Record) store.Record {
	if !s.broken("shares-response") {
		r.Response = bytes.Clone(r.Response)
	}
	if s.broken("jitter") || s.broken("renewal-is-jitter") {
		j := time.Duration(1 + rand.IntN(int(2*time.Millisecond)))
		if !r.LockedUntil.IsZero() {
			r.LockedUntil = r.LockedUntil.Add(j)
		}
		r.ExpiresAt = r.ExpiresAt.Add(j)
	}
	return r
}

func (s *mapStore) Complete(ctx context.Context, key string, tok store.Token, resp []byte, retention time.Duration) error {
	if err := s.check(ctx, store.CheckComplete(s.laxKey(key), s.laxTok(tok), retention), false); err != nil {
		return err
	}
	tok = s.tok(tok)
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(s.mkey(key))
	if raw, exists := s.m[s.mkey(key)]; !ok && exists && raw.Status == store.StatusInProgress && s.sameTok(raw.Token, tok) &&
		s.broken("complete-checks-then-writes") {
		// Accepts its own lapsed lease (the contract allows that while
		// nobody else claimed), but writes after the check, not with it.
		r, ok = raw, true
		s.window()
	}
	if raw, exists := s.m[s.mkey(key)]; !ok && exists && raw.Status == store.StatusInProgress && s.sameTok(raw.Token, tok) &&
		s.broken("complete-lapsed-noop") {
		return nil // says it stored the response, but did not
	}
	if !ok || (!s.sameTok(r.Token, tok) && !s.broken("complete-ignores-token")) {
		return fmt.Errorf("map: %w", store.ErrLeaseLost)
	}
	if r.Status == store.StatusCompleted && s.sameTok(r.Token, tok) && !s.broken("complete-overwrites") {
		return nil
	}
	if !s.broken("shares-response") {
		resp = bytes.Clone(resp)
	}
	resp = s.mangleResp(resp)
	r.Status, r.Token, r.Response = store.StatusCompleted, tok, resp
	r.LockedUntil, r.ExpiresAt = time.Time{}, s.until(retention)
	s.m[s.mkey(key)] = r
	s.purgeAt[s.mkey(key)] = r.ExpiresAt
	return nil
}

// successor is store.Successor, as the variant computes it.
func (s *mapStore) successor(prev store.Record, found bool, tok store.Token) (uint32, uint64) {
	attempt, fence := store.Successor(prev, found, tok, s.now())
	switch {
	case s.broken("attempt-not-counted"):
		attempt = 1
	case s.broken("fence-not-grown") && found:
		fence = prev.Fence
	}
	return attempt, fence
}

// Renew implements store.Store.
func (s *mapStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := s.check(ctx, store.CheckRenew(s.laxKey(key), s.laxTok(tok), lease), false); err != nil {
		return err
	}
	tok = s.tok(tok)
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.mkey(key)
	r, ok := s.live(k)
	raw, exists := s.m[k]
	switch {
	case s.broken("renew-claims") && (!ok || r.Status == store.StatusInProgress && s.sameTok(r.Token, tok)):
		// The renewal as a re-entrant Claim: it creates the record when
		// the key is free.
		if !ok {
			attempt, fence := s.successor(raw, exists && raw.Status != 0, tok)
			r = store.Record{Key: key, Fingerprint: raw.Fingerprint, Status: store.StatusInProgress, Token: tok, Attempt: attempt, Fence: fence}
		}
	case s.broken("renew-revives-lapsed") && !ok && exists && raw.Status == store.StatusInProgress && s.sameTok(raw.Token, tok):
		r = raw
	case s.broken("renew-completed") && ok && r.Status == store.StatusCompleted && s.sameTok(r.Token, tok):
		r.ExpiresAt = s.until(lease)
		s.m[k] = r
		return nil
	case s.broken("renew-ignores-token") && ok && r.Status == store.StatusInProgress:
	case !ok || r.Status != store.StatusInProgress || !s.sameTok(r.Token, tok):
		return fmt.Errorf("map: renew: %w", store.ErrLeaseLost)
	case s.broken("renew-checks-then-writes"):
		s.window() // the record may be released meanwhile; the write below brings it back
	}
	until := s.until(lease)
	r.LockedUntil, r.ExpiresAt = until, until
	s.m[k] = r
	if !s.broken("purge-ignores-renewal") {
		s.purgeAt[k] = until
	}
	return nil
}

func (s *mapStore) Release(ctx context.Context, key string, tok store.Token) error {
	if err := s.check(ctx, store.CheckRelease(s.laxKey(key), s.laxTok(tok)), false); err != nil {
		return err
	}
	tok = s.tok(tok)
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(s.mkey(key))
	if raw, exists := s.m[s.mkey(key)]; !ok && exists && raw.Status == store.StatusInProgress && s.sameTok(raw.Token, tok) &&
		s.broken("release-checks-then-deletes") {
		r, ok = raw, true
		s.window()
	}
	switch {
	case s.broken("release-deletes-anything"):
		delete(s.m, s.mkey(key))
	case s.broken("release-completes-nothing"):
	case ok && r.Status == store.StatusInProgress && s.sameTok(r.Token, tok) && s.broken("released-read-then-write"):
		s.m[s.mkey(key)] = store.Record{Key: key} // a tombstone: not live, taken over like a lapsed record
	case ok && r.Status == store.StatusInProgress && s.sameTok(r.Token, tok),
		s.broken("release-deletes-lapsed") && !ok && s.m[s.mkey(key)].Status == store.StatusInProgress && s.sameTok(s.m[s.mkey(key)].Token, tok):
		delete(s.m, s.mkey(key))
	}
	return nil
}

func (s *mapStore) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.check(ctx, store.CheckKey(key), false); err != nil {
		return store.Record{}, err
	}
	if tx := txOf(ctx); tx != nil && tx.owner == s && s.broken("tx-get-outside") {
		// Reads what was committed before the transaction began.
		r, ok := tx.before[key]
		if !ok || !r.ExpiresAt.After(s.now()) {
			return store.Record{}, fmt.Errorf("map: %w", store.ErrNotFound)
		}
		return s.out(r), nil
	}
	if !s.broken("get-unlocked") {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	r, ok := s.live(s.mkey(key))
	if !ok {
		return store.Record{}, fmt.Errorf("map: %w", store.ErrNotFound)
	}
	if s.broken("get-torn") {
		// Reads the fingerprint, then the rest of the record in a second
		// step, as two queries would.
		fp := r.Fingerprint
		s.window()
		if r, ok = s.live(s.mkey(key)); !ok {
			return store.Record{}, fmt.Errorf("map: %w", store.ErrNotFound)
		}
		r.Fingerprint = fp
	}
	if s.broken("get-first-mib") { // reads a long value in chunks, and only the first
		r.Response = r.Response[:min(len(r.Response), 1<<20)]
	}
	return s.out(r), nil
}

// Purge implements store.Purger.
func (s *mapStore) Purge(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for k, r := range s.m {
		at := s.purgeAt[k]
		if r.Status == store.StatusInProgress && !s.broken("purge-lapsed-now") {
			at = at.Add(store.LapsedKept)
		}
		if !at.After(s.now()) {
			delete(s.m, k)
			delete(s.purgeAt, k)
			n++
		}
	}
	return n, nil
}

// tok is the token as the variant stores and compares it.
func (s *mapStore) tok(t store.Token) store.Token {
	if s.broken("tokens-prefix-64") { // a 64-byte column, truncating silently
		return t[:min(len(t), 64)]
	}
	return t
}

// mkey is the key a variant really stores, as engines mangle keys.
func (s *mapStore) mkey(key string) string {
	switch s.variant {
	case "keys-fold-case": // a case-insensitive collation
		return strings.ToLower(key)
	case "keys-trim-space": // a PAD SPACE collation: trailing spaces ignored
		return strings.TrimRight(key, " ")
	case "keys-normalize": // text normalised to NFC on the way in
		return strings.NewReplacer("e\u0301", "\u00e9", "A\u030a", "\u00c5", "\u212b", "\u00c5").Replace(key)
	case "keys-truncate": // a column one byte too short, truncating silently
		return key[:min(len(key), store.MaxKeyLen-1)]
	case "keys-prefix-255": // a varchar(255) or a 255-byte prefix index
		return key[:min(len(key), 255)]
	}
	return key
}

func (s *mapStore) sameTok(a, b store.Token) bool {
	if s.broken("tokens-fold-case") {
		return strings.EqualFold(strings.TrimSpace(string(a)), strings.TrimSpace(string(b)))
	}
	return a == b
}

func (s *mapStore) sameFP(a, b string) bool {
	if s.broken("fingerprint-prefix-255") {
		return a[:min(len(a), 255)] == b[:min(len(b), 255)]
	}
	return a == b
}

func (s *mapStore) mangleResp(resp []byte) []byte {
	switch s.variant {
	case "responses-as-text": // a text column: invalid UTF-8 replaced
		return []byte(strings.ToValidUTF8(string(resp), "\uFFFD"))
	case "responses-capped": // a 1 MiB column
		return resp[:min(len(resp), 1<<20)]
	}
	return resp
}
