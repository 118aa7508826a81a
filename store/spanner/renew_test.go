package spanner

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	sp "cloud.google.com/go/spanner"
	database "cloud.google.com/go/spanner/admin/database/apiv1"

	"github.com/idemkit/idemkit/store"
)

// storedRow returns key's row as the table holds it (nil for none).
func storedRow(t *testing.T, s *Store, key string) *row {
	t.Helper()
	ro := s.client.Single()
	defer ro.Close()
	_, r, err := s.read(context.Background(), ro, key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// shortLease is a lease the tests wait out on the server's clock.
const shortLease = 300 * time.Millisecond

func lapse() { time.Sleep(shortLease + 200*time.Millisecond) }

// TestRenew checks every case of Renew's row of the state table: only a
// live lease held by the token is extended, attempt and fence kept;
// everything else is store.ErrLeaseLost and writes nothing.
func TestRenew(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	refused := func(key string, tok store.Token) {
		t.Helper()
		before := storedRow(t, s, key)
		if err := s.Renew(ctx, key, tok, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("Renew(%s) = %v, want store.ErrLeaseLost", key, err)
		}
		if after := storedRow(t, s, key); !reflect.DeepEqual(before, after) {
			t.Fatalf("a refused Renew(%s) wrote: %+v, was %+v", key, after, before)
		}
	}

	tok := store.NewToken()
	c, err := s.Claim(ctx, "live", "fp", tok, shortLease)
	if err != nil || c.Outcome != store.Acquired {
		t.Fatalf("Claim = %v, %v", c.Outcome, err)
	}
	if err := s.Renew(ctx, "live", tok, time.Minute); err != nil {
		t.Fatal(err)
	}
	lapse()
	r, err := s.Get(ctx, "live")
	if err != nil {
		t.Fatalf("the renewed lease did not outlive the first: %v", err)
	}
	if r.Token != tok || r.Attempt != 1 || r.Attempt != c.Record.Attempt || r.Fence != c.Record.Fence {
		t.Fatalf("after Renew: %+v; want the same token, attempt 1, fence %d", r, c.Record.Fence)
	}
	if d := time.Until(r.LockedUntil); d < 50*time.Second || d > 61*time.Second {
		t.Fatalf("renewed lease ends in %v, want about a minute", d)
	}

	refused("never", tok)
	if storedRow(t, s, "never") != nil {
		t.Fatal("Renew created a row")
	}

	rel := store.NewToken()
	mustClaimSp(t, s, "released", rel, time.Minute)
	if err := s.Release(ctx, "released", rel); err != nil {
		t.Fatal(err)
	}
	refused("released", rel)
	if storedRow(t, s, "released") != nil {
		t.Fatal("Renew revived a released key")
	}

	lap := store.NewToken()
	mustClaimSp(t, s, "lapsed", lap, shortLease)
	lapse()
	refused("lapsed", lap)

	done := store.NewToken()
	mustClaimSp(t, s, "completed", done, time.Minute)
	if err := s.Complete(ctx, "completed", done, []byte("r"), time.Hour); err != nil {
		t.Fatal(err)
	}
	refused("completed", done)

	mustClaimSp(t, s, "other", store.NewToken(), time.Minute)
	refused("other", store.NewToken())

	for _, bad := range []struct {
		key   string
		tok   store.Token
		lease time.Duration
	}{{"", tok, time.Minute}, {"k", "", time.Minute}, {"k", tok, 0}, {"k", tok, -time.Second}} {
		if err := s.Renew(ctx, bad.key, bad.tok, bad.lease); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Renew(%q, %q, %v) = %v, want store.ErrInvalid", bad.key, bad.tok, bad.lease, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	before := storedRow(t, s, "live")
	if err := s.Renew(cctx, "live", tok, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Renew with a cancelled context = %v, want context.Canceled", err)
	}
	if !reflect.DeepEqual(before, storedRow(t, s, "live")) {
		t.Fatal("Renew with a cancelled context wrote")
	}

	// In InTx, Renew runs in the transaction: it sees the claim before it,
	// and a rollback takes both back.
	intx := store.NewToken()
	errRollback := errors.New("roll back")
	err = s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		if _, err := st.Claim(ctx, "intx", "fp", intx, time.Minute); err != nil {
			return err
		}
		if err := st.Renew(ctx, "intx", intx, time.Hour); err != nil {
			return err
		}
		r, err := st.Get(ctx, "intx")
		if err != nil || time.Until(r.LockedUntil) < 50*time.Minute {
			t.Errorf("in the transaction after Renew: %+v, %v", r, err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("InTx = %v", err)
	}
	if storedRow(t, s, "intx") != nil {
		t.Fatal("a rolled back InTx left its claim")
	}
}

func mustClaimSp(t *testing.T, s *Store, key string, tok store.Token, lease time.Duration) store.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), key, "fp", tok, lease)
	if err != nil || c.Outcome != store.Acquired {
		t.Fatalf("Claim(%s) = %v, %v; want acquired", key, c.Outcome, err)
	}
	return c
}

// TestTakeover: a takeover of a lapsed lease is attempt 2 with a larger
// fence; the first holder's Complete and Renew are refused and its Release
// is a no-op (of its lapsed lease too); a completed record keeps attempt
// and fence; a claim over an expired record or after a release counts from
// 1.
func TestTakeover(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	first, second := store.NewToken(), store.NewToken()
	c1 := mustClaimSp(t, s, "k", first, shortLease)
	if c1.Record.Attempt != 1 || c1.Record.Fence < uint64(time.Now().Add(-time.Hour).UnixMicro()) || c1.Takeover() {
		t.Fatalf("fresh claim: attempt %d fence %d", c1.Record.Attempt, c1.Record.Fence)
	}
	again := mustClaimSp(t, s, "k", first, shortLease)
	if again.Record.Attempt != 1 || again.Record.Fence != c1.Record.Fence {
		t.Fatalf("re-entrant claim: attempt %d fence %d, want 1 and %d", again.Record.Attempt, again.Record.Fence, c1.Record.Fence)
	}
	lapse()
	if err := s.Release(ctx, "k", first); err != nil {
		t.Fatal(err)
	}
	if storedRow(t, s, "k") == nil {
		t.Fatal("Release deleted a lapsed lease")
	}
	c2 := mustClaimSp(t, s, "k", second, time.Minute)
	if c2.Record.Attempt != 2 || c2.Record.Fence <= c1.Record.Fence || !c2.Takeover() {
		t.Fatalf("takeover: attempt %d fence %d, want 2 and more than %d", c2.Record.Attempt, c2.Record.Fence, c1.Record.Fence)
	}
	if err := s.Complete(ctx, "k", first, []byte("stale"), time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the first holder's Complete = %v, want store.ErrLeaseLost", err)
	}
	if err := s.Renew(ctx, "k", first, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the first holder's Renew = %v, want store.ErrLeaseLost", err)
	}
	r, err := s.Get(ctx, "k")
	if err != nil || r.Token != second || r.Attempt != 2 || r.Fence != c2.Record.Fence {
		t.Fatalf("Get = %+v, %v; want the second holder's lease, attempt 2", r, err)
	}
	if err := s.Complete(ctx, "k", second, []byte("ok"), shortLease); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Get(ctx, "k"); err != nil || r.Attempt != 2 || r.Fence != c2.Record.Fence {
		t.Fatalf("completed: %+v, %v; want attempt 2, fence %d", r, err, c2.Record.Fence)
	}
	lapse()
	c3 := mustClaimSp(t, s, "k", store.NewToken(), time.Minute)
	if c3.Record.Attempt != 1 || c3.Record.Fence <= c2.Record.Fence {
		t.Fatalf("claim over an expired record: attempt %d fence %d, want 1 and more than %d", c3.Record.Attempt, c3.Record.Fence, c2.Record.Fence)
	}
	tok := store.NewToken()
	mustClaimSp(t, s, "rel", tok, time.Minute)
	if err := s.Release(ctx, "rel", tok); err != nil {
		t.Fatal(err)
	}
	if c := mustClaimSp(t, s, "rel", store.NewToken(), time.Minute); c.Record.Attempt != 1 {
		t.Fatalf("claim after a release: attempt %d, want 1", c.Record.Attempt)
	}
}

// TestRenewRacesRelease: a heartbeat that reaches the table around the
// holder's Release never keeps the key: after both, the key is free and
// the next claim acquires it as attempt 1.
func TestRenewRacesRelease(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	for i := range 20 {
		key := "race" + strconv.Itoa(i)
		tok := store.NewToken()
		mustClaimSp(t, s, key, tok, time.Minute)
		var wg sync.WaitGroup
		var renewErr, releaseErr error
		start := make(chan struct{})
		wg.Go(func() { <-start; renewErr = s.Renew(ctx, key, tok, time.Hour) })
		wg.Go(func() { <-start; releaseErr = s.Release(ctx, key, tok) })
		close(start)
		wg.Wait()
		if releaseErr != nil || (renewErr != nil && !errors.Is(renewErr, store.ErrLeaseLost)) {
			t.Fatalf("round %d: Release %v, Renew %v", i, releaseErr, renewErr)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("round %d: Get after Release = %v (Renew %v), want store.ErrNotFound", i, err, renewErr)
		}
		if c := mustClaimSp(t, s, key, store.NewToken(), time.Minute); c.Record.Attempt != 1 {
			t.Fatalf("round %d: attempt %d after a release, want 1", i, c.Record.Attempt)
		}
	}
	tok := store.NewToken()
	mustClaimSp(t, s, "late", tok, time.Minute)
	if err := s.Release(ctx, "late", tok); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, "late", tok, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Renew after Release = %v, want store.ErrLeaseLost", err)
	}
	if c := mustClaimSp(t, s, "late", store.NewToken(), time.Minute); c.Record.Attempt != 1 {
		t.Fatalf("attempt %d after a release and a late renewal, want 1", c.Record.Attempt)
	}
}

// TestPurgeKeepsLapsed: Purge deletes a completed record past its
// retention and a lease that lapsed more than store.LapsedKept ago, and
// keeps a lapsed lease younger than that, which a takeover then counts.
func TestPurgeKeepsLapsed(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	tok := store.NewToken()
	mustClaimSp(t, s, "done", tok, time.Minute)
	if err := s.Complete(ctx, "done", tok, []byte("r"), shortLease); err != nil {
		t.Fatal(err)
	}
	mustClaimSp(t, s, "lapsed", store.NewToken(), shortLease)
	mustClaimSp(t, s, "live", store.NewToken(), time.Hour)
	// Leases that lapsed long ago, written as they would stand.
	ago := func(key string, d time.Duration) {
		t.Helper()
		end := time.Now().Add(-d)
		_, err := s.client.Apply(ctx, []*sp.Mutation{sp.InsertOrUpdate(s.table, columns,
			[]any{key, "fp", string(store.NewToken()), int64(statusInProgress), nil, sp.NullTime{Time: end, Valid: true}, end, int64(1), end.UnixMicro()})})
		if err != nil {
			t.Fatal(err)
		}
	}
	ago("old", store.LapsedKept+time.Hour)
	ago("young", store.LapsedKept-time.Hour)
	lapse()
	n, err := s.Purge(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Purge = %d, %v; want 2 (the ended retention, the lease lapsed over LapsedKept ago)", n, err)
	}
	for key, kept := range map[string]bool{"done": false, "old": false, "lapsed": true, "young": true, "live": true} {
		if got := storedRow(t, s, key) != nil; got != kept {
			t.Errorf("after Purge, row %s kept = %v, want %v", key, got, kept)
		}
	}
	if c := mustClaimSp(t, s, "lapsed", store.NewToken(), time.Minute); c.Record.Attempt != 2 {
		t.Fatalf("takeover of a kept lapsed lease: attempt %d, want 2", c.Record.Attempt)
	}
}

// TestMigrateUpgradesOldTable: a table made by the Schema before Attempt
// and Fence, with rows in it, is upgraded in place by Migrate (the
// columns, the row deletion policy), from several Stores at once and
// again; its old rows read as Attempt 0, Fence 0, and a takeover of an old
// lease counts attempt 2.
func TestMigrateUpgradesOldTable(t *testing.T) {
	if store.LapsedKept != 24*time.Hour {
		t.Fatalf("store.LapsedKept is %v: the row deletion policy (INTERVAL 1 DAY) and Purge need changing", store.LapsedKept)
	}
	_, client := testDB(t)
	table := uniqueName("old_")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	s, err := New(client, WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	oldDDL := "CREATE TABLE `" + table + "` (Key STRING(MAX) NOT NULL, Fingerprint STRING(MAX) NOT NULL, Token STRING(MAX) NOT NULL, " +
		"Status INT64 NOT NULL, Response BYTES(MAX), LockedUntil TIMESTAMP, ExpiresAt TIMESTAMP NOT NULL) " +
		"PRIMARY KEY (Key), ROW DELETION POLICY (OLDER_THAN(ExpiresAt, INTERVAL 0 DAY))"
	leave, _ := s.enter(ctx)
	err = s.ddl(ctx, admin, []string{oldDDL})
	leave()
	if err != nil {
		t.Fatal(err)
	}
	oldCols := columns[:7]
	tok := store.NewToken()
	now := time.Now()
	_, err = client.Apply(ctx, []*sp.Mutation{
		sp.Insert(table, oldCols, []any{"live", "fp", string(tok), int64(statusInProgress), nil, sp.NullTime{Time: now.Add(time.Hour), Valid: true}, now.Add(time.Hour)}),
		sp.Insert(table, oldCols, []any{"lapsed", "fp", string(tok), int64(statusInProgress), nil, sp.NullTime{Time: now.Add(-time.Minute), Valid: true}, now.Add(-time.Minute)}),
		sp.Insert(table, oldCols, []any{"done", "fp", string(tok), int64(statusCompleted), []byte("old"), sp.NullTime{}, now.Add(time.Hour)}),
	})
	if err != nil {
		t.Fatal(err)
	}
	todo, err := s.upgrades(ctx)
	if err != nil || len(todo) != 3 {
		t.Fatalf("an old table needs %q, %v; want the three upgrades", todo, err)
	}
	// Several processes migrating at once (here Stores of one process,
	// which the emulator's gate runs one after the other).
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			other, err := New(client, WithTable(table))
			if err == nil {
				err = other.Migrate(ctx)
			}
			if err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	wg.Wait()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	if todo, err := s.upgrades(ctx); err != nil || len(todo) != 0 {
		t.Fatalf("after Migrate the table still needs %q, %v", todo, err)
	}
	r, err := s.Get(ctx, "live")
	if err != nil || r.Token != tok || r.Attempt != 0 || r.Fence != 0 {
		t.Fatalf("Get of an old lease = %+v, %v; want attempt 0, fence 0", r, err)
	}
	if err := s.Renew(ctx, "live", tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, "live", tok, []byte("r"), time.Hour); err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
	if err != nil || c.Outcome != store.Completed || string(c.Record.Response) != "old" || c.Record.Attempt != 0 {
		t.Fatalf("replay of an old record = %v %q attempt %d, %v", c.Outcome, c.Record.Response, c.Record.Attempt, err)
	}
	c, err = s.Claim(ctx, "lapsed", "fp", store.NewToken(), time.Minute)
	if err != nil || c.Outcome != store.Acquired || c.Record.Attempt != 2 || c.Record.Fence == 0 {
		t.Fatalf("takeover of an old lease = %v attempt %d fence %d, %v; want acquired, attempt 2", c.Outcome, c.Record.Attempt, c.Record.Fence, err)
	}
}
