package seal_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/cache"
	"github.com/idemkit/idemkit/store/seal"
	"github.com/idemkit/idemkit/store/sqlite"
	"github.com/idemkit/idemkit/storetest"
)

// rewriting passes every call to its store and lets a test change the
// records it returns, as someone with write access to the store would.
type rewriting struct {
	store.Store
	mu      sync.Mutex
	rewrite func(key string, r *store.Record)
}

func (w *rewriting) set(f func(key string, r *store.Record)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rewrite = f
}

func (w *rewriting) apply(key string, r *store.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rewrite != nil {
		w.rewrite(key, r)
	}
}

func (w *rewriting) Claim(ctx context.Context, key, fp string, tok store.Token, lease time.Duration) (store.Claim, error) {
	c, err := w.Store.Claim(ctx, key, fp, tok, lease)
	w.apply(key, &c.Record)
	return c, err
}

func (w *rewriting) Get(ctx context.Context, key string) (store.Record, error) {
	r, err := w.Store.Get(ctx, key)
	w.apply(key, &r)
	return r, err
}

// tenantScope is the scope function of the tests: the part of the key
// before the first '/'.
func tenantScope(key string) string { t, _, _ := strings.Cut(key, "/"); return t }

// fixture is a sealed store over a rewritable memory store, with keys for
// the tenants "a" and "b" ("a1", "b1").
type fixture struct {
	t     *testing.T
	keys  *seal.LocalKeys
	inner *rewriting
	s     seal.Store
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	keys := seal.NewLocalKeys()
	for _, id := range []string{"a1", "b1"} {
		if err := keys.Add(id[:1], id, seal.NewSecret()); err != nil {
			t.Fatal(err)
		}
	}
	inner := &rewriting{Store: newMemory(t, time.Now)}
	return &fixture{t: t, keys: keys, inner: inner, s: mustSeal(t, inner, keys, seal.WithScope(tenantScope))}
}

func (f *fixture) complete(key, fp string, resp []byte) store.Token {
	f.t.Helper()
	tok := store.NewToken()
	if c, err := f.s.Claim(f.t.Context(), key, fp, tok, time.Minute); err != nil || c.Outcome != store.Acquired {
		f.t.Fatalf("Claim(%q) = %v, %v; want acquired", key, c.Outcome, err)
	}
	if err := f.s.Complete(f.t.Context(), key, tok, resp, time.Hour); err != nil {
		f.t.Fatal(err)
	}
	return tok
}

func (f *fixture) replay(key, fp string) (store.Claim, error) {
	return f.s.Claim(f.t.Context(), key, fp, store.NewToken(), time.Minute)
}

// TestStoredFormIsSealed: the wrapped store holds neither the response nor
// the fingerprint, and the fingerprint's sealed form differs between keys
// and between secrets, so it cannot be matched or guessed offline.
func TestStoredFormIsSealed(t *testing.T) {
	f := newFixture(t)
	resp := []byte(`{"card":"4242","address":"1 Main St"}`)
	fp := "v1:0123456789abcdef"
	f.complete("a/k1", fp, resp)
	f.complete("a/k2", fp, resp)
	r1, err := f.inner.Store.Get(t.Context(), "a/k1")
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := f.inner.Store.Get(t.Context(), "a/k2")
	if bytes.Contains(r1.Response, []byte("4242")) || strings.Contains(r1.Fingerprint, fp) || strings.Contains(r1.Fingerprint, "0123456789") {
		t.Fatalf("stored record holds plaintext: fingerprint %q, response %q", r1.Fingerprint, r1.Response)
	}
	if !strings.HasPrefix(r1.Fingerprint, "s2.a1.") {
		t.Fatalf("stored fingerprint %q does not name its key id", r1.Fingerprint)
	}
	// The first 16 base64 characters after the key id are of the IV, the
	// HMAC of store key and fingerprint: they must differ between keys.
	if n1, n2 := r1.Fingerprint[6:22], r2.Fingerprint[6:22]; n1 == n2 {
		t.Fatalf("one fingerprint under two store keys has one HMAC %q", n1)
	}
	other := seal.NewLocalKeys()
	_ = other.Add("a", "a1", seal.NewSecret())
	s2 := mustSeal(t, newMemory(t, time.Now), other, seal.WithScope(tenantScope))
	tok := store.NewToken()
	if _, err := s2.Claim(t.Context(), "a/k1", fp, tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	r3, _ := s2.Unwrap().Get(t.Context(), "a/k1")
	if r3.Fingerprint == r1.Fingerprint {
		t.Fatal("one fingerprint under two secrets was stored alike")
	}
	// And through the sealed store, everything reads as it was written.
	c, err := f.replay("a/k1", fp)
	if err != nil || c.Outcome != store.Completed || !bytes.Equal(c.Record.Response, resp) || c.Record.Fingerprint != fp {
		t.Fatalf("replay = %v %q fp %q, %v", c.Outcome, c.Record.Response, c.Record.Fingerprint, err)
	}
	if c, err := f.replay("a/k1", "v1:other"); err != nil || c.Outcome != store.Mismatch || c.Record.Fingerprint != fp {
		t.Fatalf("Claim with another fingerprint = %v fp %q, %v; want mismatch showing the stored fingerprint", c.Outcome, c.Record.Fingerprint, err)
	}
}

// TestRotation: after a rotation, records sealed under the older key still
// replay, still mismatch another request, an in-flight claim is renewed and
// completed by its holder, and new records are sealed under the new key.
func TestRotation(t *testing.T) {
	f := newFixture(t)
	f.complete("a/done", "fp", []byte("old"))
	holder := store.NewToken()
	if _, err := f.s.Claim(t.Context(), "a/flight", "fp", holder, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.keys.Add("a", "a2", seal.NewSecret()); err != nil {
		t.Fatal(err)
	}
	if c, err := f.replay("a/done", "fp"); err != nil || c.Outcome != store.Completed || string(c.Record.Response) != "old" || c.Record.Fingerprint != "fp" {
		t.Fatalf("replay of a record sealed before the rotation = %v %q, %v", c.Outcome, c.Record.Response, err)
	}
	if c, err := f.replay("a/done", "other"); err != nil || c.Outcome != store.Mismatch || c.Record.Fingerprint != "fp" {
		t.Fatalf("mismatch after the rotation = %v %q, %v", c.Outcome, c.Record.Fingerprint, err)
	}
	if c, err := f.replay("a/flight", "fp"); err != nil || c.Outcome != store.InProgress {
		t.Fatalf("duplicate of an in-flight claim after the rotation = %v, %v; want in progress", c.Outcome, err)
	}
	if c, err := f.s.Claim(t.Context(), "a/flight", "fp", holder, time.Minute); err != nil || c.Outcome != store.Acquired {
		t.Fatalf("the holder's renewal after the rotation = %v, %v; want acquired", c.Outcome, err)
	}
	if err := f.s.Complete(t.Context(), "a/flight", holder, []byte("new"), time.Hour); err != nil {
		t.Fatal(err)
	}
	r, _ := f.inner.Store.Get(t.Context(), "a/flight")
	if !strings.HasPrefix(r.Fingerprint, "s2.a1.") || !bytes.HasPrefix(r.Response, []byte("\x01\x02a2")) {
		t.Fatalf("in-flight record: fingerprint %q (want under a1, as claimed), response header %q (want under a2)", r.Fingerprint, r.Response[:4])
	}
	f.complete("a/fresh", "fp", []byte("fresh"))
	if r, _ := f.inner.Store.Get(t.Context(), "a/fresh"); !strings.HasPrefix(r.Fingerprint, "s2.a2.") {
		t.Fatalf("new record's fingerprint %q, want under a2", r.Fingerprint)
	}
	if c, err := f.replay("a/flight", "fp"); err != nil || string(c.Record.Response) != "new" {
		t.Fatalf("replay = %q, %v", c.Record.Response, err)
	}
}

// TestCryptoShredding: deleting a tenant's key makes its responses
// unreadable, and a replay answers "kept without response": to the engine
// a NotKept replay, the work never run again. Other tenants are untouched.
func TestCryptoShredding(t *testing.T) {
	f := newFixture(t)
	e, err := idem.New(f.s)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	work := func(resp string) idem.Work {
		return func(context.Context) idem.Verdict { runs.Add(1); return idem.Keep([]byte(resp)) }
	}
	for _, k := range []string{"a/pay", "b/pay"} {
		if _, err := e.Run(t.Context(), k, "fp", work("paid "+k)); err != nil {
			t.Fatal(err)
		}
	}
	// Tenant a is offboarded: a new key for new records, the old one deleted.
	if err := f.keys.Add("a", "a2", seal.NewSecret()); err != nil {
		t.Fatal(err)
	}
	f.keys.Delete("a", "a1")
	res, err := e.Run(t.Context(), "a/pay", "fp", work("second run"))
	if err != nil || res.Outcome != store.Completed || !res.NotKept || res.Record.Response != nil {
		t.Fatalf("replay after shredding = %v NotKept %v %q, %v; want a NotKept replay", res.Outcome, res.NotKept, res.Record.Response, err)
	}
	if r, err := f.s.Get(t.Context(), "a/pay"); err != nil || r.Status != store.StatusCompleted || bytes.Contains(r.Response, []byte("paid")) {
		t.Fatalf("Get after shredding = %v %q, %v", r.Status, r.Response, err)
	}
	res, err = e.Run(t.Context(), "b/pay", "fp", work("second run"))
	if err != nil || string(res.Record.Response) != "paid b/pay" {
		t.Fatalf("other tenant's replay = %q, %v", res.Record.Response, err)
	}
	// With no key at all, the tenant's calls fail clearly; nothing runs.
	f.keys.Delete("a", "a2")
	if _, err := e.Run(t.Context(), "a/pay", "fp", work("second run")); !errors.Is(err, seal.ErrKeyNotFound) {
		t.Fatalf("Run without a key = %v, want ErrKeyNotFound", err)
	}
	if _, err := f.replay("a/new", "fp"); !errors.Is(err, seal.ErrKeyNotFound) {
		t.Fatalf("Claim without a key = %v, want ErrKeyNotFound", err)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the work ran %d times, want 2 (once per tenant)", n)
	}
}

// TestTamperedRejected: a response or fingerprint changed in the store, a
// response moved to another key, and a different secret under the same id
// are errors matching ErrCorrupt that quote none of the plaintext; the
// engine does not run the work on them.
func TestTamperedRejected(t *testing.T) {
	const resp, fp = "secret-response", "v1:secret-fingerprint"
	for name, rewrite := range map[string]func(*fixture) func(string, *store.Record){
		"flipped byte": func(*fixture) func(string, *store.Record) {
			return func(_ string, r *store.Record) {
				if len(r.Response) > 0 {
					r.Response[len(r.Response)-1] ^= 1
				}
			}
		},
		"moved to another key": func(f *fixture) func(string, *store.Record) {
			other, _ := f.inner.Store.Get(context.Background(), "a/other")
			return func(_ string, r *store.Record) { r.Response = other.Response }
		},
		"not sealed": func(*fixture) func(string, *store.Record) {
			return func(_ string, r *store.Record) {
				if r.Status == store.StatusCompleted {
					r.Response = []byte(resp)
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.complete("a/k", fp, []byte(resp))
			f.complete("a/other", fp, []byte("other"))
			f.inner.set(rewrite(f))
			checkCorrupt(t, f, resp, fp)
		})
	}
	t.Run("fingerprint changed", func(t *testing.T) {
		f := newFixture(t)
		f.complete("a/k", fp, []byte(resp))
		f.inner.set(func(_ string, r *store.Record) { r.Fingerprint = r.Fingerprint[:len(r.Fingerprint)-2] + "AA" })
		if _, err := f.s.Get(t.Context(), "a/k"); !errors.Is(err, seal.ErrCorrupt) {
			t.Fatalf("Get = %v, want ErrCorrupt", err)
		}
	})
	t.Run("fingerprint in the earlier s1 form", func(t *testing.T) {
		// What a build of main before "s2." stored: a retry of it is an
		// error, never a second run.
		f := newFixture(t)
		tok := store.NewToken()
		if _, err := f.inner.Store.Claim(t.Context(), "a/k", "s1.a1."+strings.Repeat("A", 127), tok, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := f.inner.Store.Complete(t.Context(), "a/k", tok, []byte("\x01\x02a1"+strings.Repeat("x", 40)), time.Hour); err != nil {
			t.Fatal(err)
		}
		checkCorrupt(t, f, resp, fp)
	})
	t.Run("secret changed under the id", func(t *testing.T) {
		p := &swappable{k: seal.Key{ID: "k1", Secret: seal.NewSecret()}}
		s := mustSeal(t, newMemory(t, time.Now), p)
		tok := store.NewToken()
		if _, err := s.Claim(t.Context(), "k", fp, tok, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(t.Context(), "k", tok, []byte(resp), time.Hour); err != nil {
			t.Fatal(err)
		}
		p.set(seal.Key{ID: "k1", Secret: seal.NewSecret()})
		if _, err := s.Get(t.Context(), "k"); !errors.Is(err, seal.ErrCorrupt) {
			t.Fatalf("Get after the provider's secret changed = %v, want ErrCorrupt", err)
		}
	})
	t.Run("another secret under the id", func(t *testing.T) {
		f := newFixture(t)
		f.complete("a/k", fp, []byte(resp))
		wrong := seal.NewLocalKeys()
		_ = wrong.Add("a", "a1", seal.NewSecret())
		s := mustSeal(t, f.inner.Store, wrong, seal.WithScope(tenantScope))
		if _, err := s.Get(t.Context(), "a/k"); !errors.Is(err, seal.ErrCorrupt) {
			t.Fatalf("Get under a wrong secret = %v, want ErrCorrupt", err)
		}
	})
}

func checkCorrupt(t *testing.T, f *fixture, resp, fp string) {
	t.Helper()
	_, err := f.replay("a/k", fp)
	if !errors.Is(err, seal.ErrCorrupt) {
		t.Fatalf("replay = %v, want ErrCorrupt", err)
	}
	for _, secret := range []string{resp, fp, "a/k"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("error %q quotes %q", err, secret)
		}
	}
	e, _ := idem.New(f.s)
	ran := false
	if _, err := e.Run(t.Context(), "a/k", fp, func(context.Context) idem.Verdict { ran = true; return idem.Keep(nil) }); err == nil || ran {
		t.Fatalf("engine on a tampered record: ran %v, err %v; want an error and no run", ran, err)
	}
}

func TestNewRejects(t *testing.T) {
	m := newMemory(t, time.Now)
	keys := testKeys(t)
	for name, tc := range map[string]struct {
		inner store.Store
		keys  seal.KeyProvider
		opts  []seal.Option
	}{
		"nil store":      {nil, keys, nil},
		"nil provider":   {m, nil, nil},
		"nil option":     {m, keys, []seal.Option{nil}},
		"nil scope func": {m, keys, []seal.Option{seal.WithScope(nil)}},
	} {
		if _, err := seal.New(tc.inner, tc.keys, tc.opts...); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
}

// swappable is a provider of one key that a test can replace.
type swappable struct {
	mu sync.Mutex
	k  seal.Key
}

func (p *swappable) set(k seal.Key) { p.mu.Lock(); defer p.mu.Unlock(); p.k = k }
func (p *swappable) CurrentKey(context.Context, string) (seal.Key, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.k, nil
}
func (p *swappable) Key(ctx context.Context, scope, _ string) (seal.Key, error) {
	return p.CurrentKey(ctx, scope)
}

// TestInTxSeals: what fn's Store writes inside InTx is sealed like the rest
// and opens after the commit.
func TestInTxSeals(t *testing.T) {
	sq, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	if err := sq.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := mustSeal(t, sq, testKeys(t))
	err = s.(store.Transactor).InTx(t.Context(), func(ctx context.Context, tx store.Store) error {
		tok := store.NewToken()
		if _, err := tx.Claim(ctx, "k", "fp", tok, time.Minute); err != nil {
			return err
		}
		return tx.Complete(ctx, "k", tok, []byte("in tx"), time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := sq.Get(t.Context(), "k"); bytes.Contains(r.Response, []byte("in tx")) || !strings.HasPrefix(r.Fingerprint, "s2.") {
		t.Fatalf("stored inside InTx in clear: %q %q", r.Fingerprint, r.Response)
	}
	if c, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute); err != nil || string(c.Record.Response) != "in tx" {
		t.Fatalf("replay after the commit = %q, %v", c.Record.Response, err)
	}
}

// badProvider returns keys a provider must not.
type badProvider struct{ k seal.Key }

func (p badProvider) CurrentKey(context.Context, string) (seal.Key, error)  { return p.k, nil }
func (p badProvider) Key(context.Context, string, string) (seal.Key, error) { return p.k, nil }

func TestBadKeysAreClearErrors(t *testing.T) {
	for name, k := range map[string]seal.Key{
		"short secret": {ID: "k1", Secret: make([]byte, 16)},
		"empty id":     {ID: "", Secret: make([]byte, 32)},
		"id with /":    {ID: "a/b", Secret: make([]byte, 32)},
	} {
		s := mustSeal(t, newMemory(t, time.Now), badProvider{k})
		_, err := s.Claim(t.Context(), "k", "fp", store.NewToken(), time.Minute)
		if err == nil || !strings.Contains(err.Error(), "seal: claim: the provider's key") {
			t.Errorf("%s: Claim = %v, want an error about the provider's key", name, err)
		}
	}
	if _, err := mustSeal(t, newMemory(t, time.Now), testKeys(t)).Claim(t.Context(), "k", strings.Repeat("f", seal.MaxFingerprintLen+1), store.NewToken(), time.Minute); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Claim with a fingerprint over MaxFingerprintLen = %v, want ErrInvalid", err)
	}
}

func TestKeyFile(t *testing.T) {
	a1, a2, d := seal.NewSecret(), seal.NewSecret(), seal.NewSecret()
	file := "# keys\n" + seal.FormatKey("", seal.Key{ID: "d1", Secret: d}) + "\n\n" +
		seal.FormatKey("acme", seal.Key{ID: "a1", Secret: a1}) + "\n" + seal.FormatKey("acme", seal.Key{ID: "a2", Secret: a2}) + "\n"
	keys, err := seal.ParseKeys(strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := keys.CurrentKey(t.Context(), "acme"); err != nil || k.ID != "a2" || !bytes.Equal(k.Secret, a2) {
		t.Fatalf("CurrentKey(acme) = %q, %v; want a2, the last line", k.ID, err)
	}
	if k, err := keys.Key(t.Context(), "acme", "a1"); err != nil || !bytes.Equal(k.Secret, a1) {
		t.Fatalf("Key(acme, a1) = %v", err)
	}
	if k, err := keys.CurrentKey(t.Context(), ""); err != nil || k.ID != "d1" {
		t.Fatalf("CurrentKey(\"\") = %q, %v", k.ID, err)
	}
	if _, err := keys.Key(t.Context(), "acme", "nope"); !errors.Is(err, seal.ErrKeyNotFound) {
		t.Fatalf("Key of an unknown id = %v, want ErrKeyNotFound", err)
	}
	short := "k1 " + seal.FormatKey("", seal.Key{ID: "x", Secret: []byte("0123456789")})[2:]
	for name, bad := range map[string]string{
		"one field":    "justone\n",
		"four fields":  "a b c d\n",
		"not base64":   "k1 %%%%\n",
		"short secret": short + "\n",
		"bad id":       "k/1 " + seal.FormatKey("", seal.Key{ID: "x", Secret: d})[2:] + "\n",
		"id reused":    seal.FormatKey("", seal.Key{ID: "k1", Secret: a1}) + "\n" + seal.FormatKey("", seal.Key{ID: "k1", Secret: a2}) + "\n",
	} {
		_, err := seal.ParseKeys(strings.NewReader(bad))
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "line ") {
			t.Errorf("%s: ParseKeys = %v, want ErrInvalid naming the line", name, err)
			continue
		}
		for _, s := range [][]byte{a1, a2, d} {
			if strings.Contains(err.Error(), seal.FormatKey("", seal.Key{ID: "k", Secret: s})[2:]) {
				t.Errorf("%s: error %q quotes a secret", name, err)
			}
		}
	}
}

// plainStore is a store with no optional interface at all.
type plainStore struct{ store.Store }

// txOnly is a store that is a Transactor and not a Purger.
type txOnly struct{ *sqlite.Store }

func (txOnly) Purge() {} // hides sqlite's Purge(ctx) with another signature

// TestCapabilities: the sealed store implements Transactor and Purger
// exactly when the wrapped store does, and so does a cache in front of it.
func TestCapabilities(t *testing.T) {
	sq, err := sqlite.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	for name, tc := range map[string]struct {
		inner      store.Store
		tx, purger bool
	}{
		"neither":    {plainStore{newMemory(t, time.Now)}, false, false},
		"purger":     {newMemory(t, time.Now), false, true},
		"transactor": {txOnly{sq}, true, false},
		"both":       {sq, true, true},
	} {
		s := mustSeal(t, tc.inner, testKeys(t))
		c, err := cache.New(s)
		if err != nil {
			t.Fatal(err)
		}
		for layer, st := range map[string]store.Store{"seal": s, "cache over seal": c} {
			_, tx := st.(store.Transactor)
			_, purger := st.(store.Purger)
			if tx != tc.tx || purger != tc.purger {
				t.Errorf("%s, %s: Transactor %v, Purger %v; want %v, %v", name, layer, tx, purger, tc.tx, tc.purger)
			}
		}
		if s.Unwrap() != tc.inner {
			t.Errorf("%s: Unwrap is not the wrapped store", name)
		}
	}
}

// TestConformanceCacheOverSealMemory runs the suite on
// cache.New(seal.New(memory)), on one manual clock.
func TestConformanceCacheOverSealMemory(t *testing.T) {
	storetest.Run(t, harness(func(t *testing.T) storetest.Subject {
		clock := storetest.NewManualClock(start)
		c, err := cache.New(mustSeal(t, newMemory(t, clock.Now), testKeys(t)), cache.WithClock(clock.Now), cache.WithMargin(0))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Subject{Store: c, Clock: clock}
	}))
}

// TestConformanceCacheOverSealRedis runs the suite on
// cache.New(seal.New(redisStore, keys)) over the real Redis.
func TestConformanceCacheOverSealRedis(t *testing.T) {
	rc := realRedis(t)
	h := harness(func(t *testing.T) storetest.Subject {
		c, err := cache.New(mustSeal(t, newRedis(t, rc), testKeys(t)))
		if err != nil {
			t.Fatal(err)
		}
		return storetest.Subject{Store: c}
	})
	h.ShortLease = 200 * time.Millisecond
	storetest.Run(t, h)
}
