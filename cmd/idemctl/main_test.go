package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/storetest"
)

// backend is one store the end-to-end test runs idemctl on: url opens it
// by URL, s is the test's own handle on the same records, and lapse lets
// a lease of d (begun just now) run out.
type backend struct {
	url   string
	s     store.Store
	open  func(context.Context, string) (store.Store, error)
	lapse func(t *testing.T, key string, d time.Duration)
	short time.Duration
}

// needEnv returns the variable's value, or skips (fails under CI=true).
func needEnv(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set, and CI=true requires every server", name)
		}
		t.Skipf("%s is not set; skipping", name)
	}
	return v
}

func unique(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// openShared opens url for the test and migrates it.
func openShared(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(s) })
	if err := store.Migrate(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitLapsed waits on the real clock until the store no longer reports key
// in progress.
func waitLapsed(t *testing.T, s store.Store, key string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d + 10*time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		e, err := s.(store.Inspector).Lookup(t.Context(), key)
		if errors.Is(err, store.ErrNotFound) || (err == nil && e.State == store.StateLapsed) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q still in progress %v after its lease of %v", key, time.Since(deadline.Add(-d-10*time.Second)), d)
		}
	}
}

func backends(t *testing.T) map[string]func(t *testing.T) backend {
	real := func(t *testing.T, url string) backend {
		s := openShared(t, url)
		return backend{url: url, s: s, open: store.Open, short: 300 * time.Millisecond,
			lapse: func(t *testing.T, key string, d time.Duration) { waitLapsed(t, s, key, d) }}
	}
	return map[string]func(t *testing.T) backend{
		"memory": func(t *testing.T) backend {
			clock := storetest.NewManualClock(time.Now())
			s, err := memory.New(memory.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return backend{url: "memory://", s: s, short: time.Minute,
				open:  func(context.Context, string) (store.Store, error) { return nopClose{s}, nil },
				lapse: func(_ *testing.T, _ string, d time.Duration) { clock.Advance(d + time.Second) }}
		},
		"sqlite": func(t *testing.T) backend {
			return real(t, "sqlite://"+filepath.Join(t.TempDir(), "keys.db"))
		},
		"postgres": func(t *testing.T) backend {
			u := needEnv(t, "IDEMKIT_POSTGRES_URL")
			table := unique("idemctl_")
			b := real(t, u+sep(u)+"table="+table)
			t.Cleanup(func() { dropPostgres(t, u, table) })
			return b
		},
		"mysql": func(t *testing.T) backend {
			dsn := needEnv(t, "IDEMKIT_MYSQL_DSN") // root@tcp(127.0.0.1:3306)/test
			user, rest, _ := strings.Cut(dsn, "@tcp(")
			addr, db, _ := strings.Cut(rest, ")/")
			table := unique("idemctl_")
			u := "mysql://" + user + "@" + addr + "/" + db
			b := real(t, u+"?table="+table)
			t.Cleanup(func() { dropMySQL(t, dsn, table) })
			return b
		},
		"redis": func(t *testing.T) backend {
			addr := needEnv(t, "IDEMKIT_REDIS_ADDR")
			prefix := unique("idemctl:") + ":"
			t.Cleanup(func() { forgetRedis(t, addr, prefix) })
			return real(t, "redis://"+addr+"/0?prefix="+prefix)
		},
		"redis-cluster": func(t *testing.T) backend {
			addrs := needEnv(t, "IDEMKIT_REDIS_CLUSTER_ADDRS")
			prefix := unique("idemctl:") + ":"
			t.Cleanup(func() { forgetCluster(t, strings.Split(addrs, ","), prefix) })
			return real(t, "redis+cluster://"+addrs+"?prefix="+prefix)
		},
	}
}

func sep(u string) string {
	if strings.Contains(u, "?") {
		return "&"
	}
	return "?"
}

// dropPostgres and dropMySQL drop the table the test made; forgetRedis
// deletes the keys under its prefix.
func dropPostgres(t *testing.T, url, table string) {
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
		t.Error(err)
	}
}

func dropMySQL(t *testing.T, dsn, table string) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer db.Close()
	if _, err := db.Exec("DROP TABLE IF EXISTS `" + table + "`"); err != nil {
		t.Error(err)
	}
}

func forgetRedis(t *testing.T, addr, prefix string) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	if err := deleteUnder(context.Background(), c, prefix); err != nil {
		t.Error(err)
	}
}

func forgetCluster(t *testing.T, addrs []string, prefix string) {
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	defer c.Close()
	if err := c.ForEachMaster(context.Background(), func(ctx context.Context, n *goredis.Client) error {
		return deleteUnder(ctx, n, prefix)
	}); err != nil {
		t.Error(err)
	}
}

// deleteUnder deletes the keys of one server that start with prefix.
func deleteUnder(ctx context.Context, c *goredis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
	return iter.Err()
}

// nopClose keeps idemctl's Close from closing the test's memory store.
type nopClose struct{ store.Store }

func (n nopClose) List(ctx context.Context, o store.ListOptions) (store.Page, error) {
	return n.Store.(store.Inspector).List(ctx, o)
}
func (n nopClose) Count(ctx context.Context) (store.Counts, error) {
	return n.Store.(store.Inspector).Count(ctx)
}
func (n nopClose) Lookup(ctx context.Context, key string) (store.Entry, error) {
	return n.Store.(store.Inspector).Lookup(ctx, key)
}
func (n nopClose) Purge(ctx context.Context) (int64, error) { return n.Store.(store.Purger).Purge(ctx) }

// ctl runs idemctl on b and returns its exit code, stdout and stderr.
func ctl(t *testing.T, b backend, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(t.Context(), append([]string{"-store-url", b.url}, args...), &out, &errOut, b.open)
	return code, out.String(), errOut.String()
}

func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

func keysOf(lines []map[string]any) []string {
	var keys []string
	for _, l := range lines {
		keys = append(keys, l["key"].(string))
	}
	return keys
}

// TestEndToEnd runs idemctl on every backend: a slow in-flight key is
// listed in progress, a crashed one lapsed (where the backend keeps lapsed
// records), release frees a stuck key so the next Claim acquires it and
// writes the audit line, and a completed key is refused, with --force too.
func TestEndToEnd(t *testing.T) {
	for name, mk := range backends(t) {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			ctx := t.Context()
			slow, crashed, done := store.NewToken(), store.NewToken(), store.NewToken()
			mustClaim(t, b.s, "slow", slow, time.Hour)
			mustClaim(t, b.s, "crashed", crashed, b.short)
			mustClaim(t, b.s, "done", done, time.Hour)
			if err := b.s.Complete(ctx, "done", done, []byte(`{"paid":true}`), time.Hour); err != nil {
				t.Fatal(err)
			}

			code, out, errOut := ctl(t, b, "-raw", "list", "--state", "in_progress", "--json")
			lines := jsonLines(t, out)
			if code != 0 || strings.Join(keysOf(lines), ",") != "crashed,slow" {
				t.Fatalf("list --state in_progress = %d %q %q; want crashed then slow (oldest deadline first)", code, out, errOut)
			}
			for _, l := range lines {
				if l["state"] != "in_progress" || l["expires_at"] == nil || l["locked_until"] == nil || l["token_hash"] == "" {
					t.Errorf("JSON line %v lacks state, deadlines or token_hash", l)
				}
			}
			if strings.Contains(out, string(slow)) {
				t.Errorf("list shows a token in clear: %s", out)
			}

			b.lapse(t, "crashed", b.short)
			_, out, _ = ctl(t, b, "-raw", "list", "--state", "lapsed", "--json")
			_, kept := b.s.(store.Inspector).Lookup(ctx, "crashed")
			if want := "crashed"; kept == nil && strings.Join(keysOf(jsonLines(t, out)), ",") != want {
				t.Errorf("list --state lapsed = %q, want %s", out, want)
			} else if kept != nil && out != "" {
				t.Errorf("list --state lapsed = %q on a store that keeps no lapsed record", out)
			}

			// A lapsed key is free already: nothing to release, said so.
			if code, out, errOut := ctl(t, b, "-raw", "release", "crashed", "--reason", "crash"); code != 0 || !strings.Contains(out, "already free") || !strings.Contains(errOut, `"outcome":`) {
				t.Errorf("release of a lapsed key = %d %q %q; want 0, already free, an audit line", code, out, errOut)
			}

			// Redacted by default: the key is not printed as stored.
			if _, out, _ := ctl(t, b, "list", "--state", "in_progress"); strings.Contains(out, "slow") || !strings.Contains(out, "hmac:") {
				t.Errorf("list without -raw printed %q: want keys hashed", out)
			}

			// The stuck key: refused without a reason, released with one.
			if code, _, errOut := ctl(t, b, "release", "slow"); code != 2 || !strings.Contains(errOut, "--reason") {
				t.Errorf("release without --reason = %d %q, want 2 and a word on --reason", code, errOut)
			}
			auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
			code, out, errOut = ctl(t, b, "-raw", "release", "slow", "--reason", "INC-1: worker hung", "--audit-file", auditFile)
			if code != 0 || !strings.Contains(out, "released slow") {
				t.Fatalf("release = %d %q %q", code, out, errOut)
			}
			a, err := os.ReadFile(auditFile)
			if err != nil {
				t.Fatal(err)
			}
			al := jsonLines(t, string(a))
			if len(al) != 1 || al[0]["outcome"] != "released" || al[0]["reason"] != "INC-1: worker hung" || al[0]["key"] != "slow" ||
				al[0]["token_hash"] != store.HashToken(slow) || al[0]["state_before"] != "in_progress" {
				t.Errorf("audit line %s", a)
			}
			if c, err := b.s.Claim(ctx, "slow", "fp", store.NewToken(), time.Minute); err != nil || c.Outcome != store.Acquired {
				t.Errorf("Claim after release = %v, %v; want acquired", c.Outcome, err)
			}

			// A completed key is refused, --force too, and stays.
			for _, force := range [][]string{nil, {"--force"}} {
				args := append([]string{"-raw", "release", "done", "--reason", "test"}, force...)
				code, _, errOut := ctl(t, b, args...)
				if code != 1 || !strings.Contains(errOut, "refused") {
					t.Errorf("release %v of a completed key = %d %q; want 1 and refused", force, code, errOut)
				}
				if len(force) > 0 && !strings.Contains(errOut, "no operation that deletes a completed record") {
					t.Errorf("release --force of a completed key does not say why: %q", errOut)
				}
			}
			if r, err := b.s.Get(ctx, "done"); err != nil || r.Status != store.StatusCompleted {
				t.Errorf("completed key after refused releases: %+v, %v", r, err)
			}

			code, out, _ = ctl(t, b, "-raw", "show", "done", "--response")
			if code != 0 || !strings.Contains(out, "state:") || !strings.Contains(out, "completed") || !strings.Contains(out, `{"paid":true}`) {
				t.Errorf("show --response = %d %q", code, out)
			}
			if _, out, _ := ctl(t, b, "-raw", "show", "done"); strings.Contains(out, "paid") {
				t.Errorf("show without --response printed the response: %q", out)
			}
			if code, _, errOut := ctl(t, b, "-raw", "show", "nope"); code != 1 || !strings.Contains(errOut, "not found") {
				t.Errorf("show of an absent key = %d %q", code, errOut)
			}
			code, out, _ = ctl(t, b, "stats", "--json")
			st := jsonLines(t, out)
			if code != 0 || len(st) != 1 || st[0]["in_progress"] != float64(1) || st[0]["completed"] != float64(1) || st[0]["oldest_lease_until"] == nil {
				t.Errorf("stats --json = %d %q", code, out)
			}
			if code, out, errOut := ctl(t, b, "purge"); code != 0 || !strings.Contains(out, "purged") {
				t.Errorf("purge = %d %q %q", code, out, errOut)
			}
		})
	}
}

func mustClaim(t *testing.T, s store.Store, key string, tok store.Token, lease time.Duration) {
	t.Helper()
	c, err := s.Claim(t.Context(), key, "fp", tok, lease)
	if err != nil || c.Outcome != store.Acquired {
		t.Fatalf("Claim(%q) = %v, %v", key, c.Outcome, err)
	}
}

func TestUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"-help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "Examples:") {
		t.Errorf("-help = %d %q", code, out.String())
	}
	for _, args := range [][]string{
		{},
		{"-store-url", "memory://", "frobnicate"},
		{"list"},
		{"-store-url", "memory://", "list", "--state", "stuck"},
		{"-store-url", "memory://", "list", "--older-than", "soon"},
		{"-store-url", "memory://", "-raw", "-hash-secret-file", "x", "list"},
		{"-store-url", "memory://", "show"},
	} {
		out.Reset()
		errOut.Reset()
		if code := run(t.Context(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "idemctl: ") {
			t.Errorf("%q = %d %q, want 2 and a message", args, code, errOut.String())
		}
	}
	if code := run(t.Context(), []string{"-store-url", "nosuch://x", "stats"}, &out, &errOut); code != 1 {
		t.Errorf("unknown scheme = %d, want 1", code)
	}
}

// TestHashSecretFile: with the operators' shared secret, keys print as the
// engine's keyer.HashKeys logs them, the same in every run.
func TestHashSecretFile(t *testing.T) {
	s, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustClaim(t, s, "k", store.NewToken(), time.Minute)
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := backend{url: "memory://", open: func(context.Context, string) (store.Store, error) { return nopClose{s}, nil }}
	_, first, _ := ctl(t, b, "-hash-secret-file", f, "list", "--json")
	_, second, _ := ctl(t, b, "-hash-secret-file", f, "list", "--json")
	if first != second || !strings.Contains(first, `"key":"hmac:`) {
		t.Errorf("hashed keys differ between runs or are not hashed: %q, %q", first, second)
	}
}

// takeoverBetween is a memory store whose first Lookup is followed at once
// by a lapse of the lease and a takeover by another holder: what release
// must see between its look and its Release.
type takeoverBetween struct {
	nopClose
	clock *storetest.ManualClock
	next  store.Token
	done  bool
}

func (s *takeoverBetween) Lookup(ctx context.Context, key string) (store.Entry, error) {
	e, err := s.nopClose.Lookup(ctx, key)
	if !s.done {
		s.done = true
		s.clock.Advance(2 * time.Minute)
		if _, err := s.Claim(ctx, key, "fp", s.next, time.Hour); err != nil {
			return e, err
		}
	}
	return e, err
}

// TestReleaseNeverFreesANewHolder: when the key changes hands between the
// look and the Release, release refuses, and the new holder keeps the key.
func TestReleaseNeverFreesANewHolder(t *testing.T) {
	clock := storetest.NewManualClock(time.Now())
	m, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mustClaim(t, m, "k", store.NewToken(), time.Minute)
	s := &takeoverBetween{nopClose: nopClose{m}, clock: clock, next: store.NewToken()}
	b := backend{url: "memory://", open: func(context.Context, string) (store.Store, error) { return s, nil }}
	code, _, errOut := ctl(t, b, "-raw", "release", "k", "--reason", "stuck")
	if code != 1 || !strings.Contains(errOut, "changed hands") || !strings.Contains(errOut, `"outcome":"refused"`) {
		t.Errorf("release across a takeover = %d %q; want 1, refused, changed hands", code, errOut)
	}
	if r, err := m.Get(t.Context(), "k"); err != nil || r.Token != s.next || r.Status != store.StatusInProgress {
		t.Errorf("the new holder lost the key: %+v, %v", r, err)
	}
}

// TestAttempts: list (table and JSON) and show carry the attempt and the
// fence of each record, a takeover shows attempt 2 with a larger fence, and
// the audit line of a lapsed key names the attempt that takes it over.
func TestAttempts(t *testing.T) {
	clock := storetest.NewManualClock(time.Now())
	m, err := memory.New(memory.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := backend{url: "memory://", open: func(context.Context, string) (store.Store, error) { return nopClose{m}, nil }}
	first := store.NewToken()
	mustClaim(t, m, "k", first, time.Minute)
	mustClaim(t, m, "other", store.NewToken(), time.Hour)

	_, out, _ := ctl(t, b, "-raw", "list", "--json")
	lines := jsonLines(t, out)
	if len(lines) != 2 || lines[0]["key"] != "k" || lines[0]["attempt"] != float64(1) {
		t.Fatalf("list --json = %q, want k first with attempt 1", out)
	}
	fence1, ok := lines[0]["fence"].(float64)
	if !ok || fence1 < 1 {
		t.Fatalf("list --json: fence of k = %v, want a positive number", lines[0]["fence"])
	}

	// The lease lapses: the record stays lapsed, and release leaves it be,
	// saying which attempt takes it over.
	clock.Advance(2 * time.Minute)
	code, out, errOut := ctl(t, b, "-raw", "release", "k", "--reason", "crashed")
	if code != 0 || !strings.Contains(out, "as attempt 2") {
		t.Errorf("release of a lapsed key = %d %q %q, want 0 and 'as attempt 2'", code, out, errOut)
	}
	al := jsonLines(t, errOut)
	if len(al) != 1 || al[0]["outcome"] != "already_free" || al[0]["state_before"] != "lapsed" || al[0]["attempt"] != float64(1) {
		t.Errorf("audit line of a lapsed release = %s", errOut)
	}

	// A takeover: attempt 2, a larger fence.
	second := store.NewToken()
	c, err := m.Claim(t.Context(), "k", "fp", second, time.Minute)
	if err != nil || !c.Takeover() {
		t.Fatalf("Claim after the lapse = %+v, %v; want a takeover", c, err)
	}
	_, out, _ = ctl(t, b, "-raw", "show", "k", "--json")
	sh := jsonLines(t, out)
	if len(sh) != 1 || sh[0]["attempt"] != float64(2) || sh[0]["fence"].(float64) <= fence1 || sh[0]["token_hash"] != store.HashToken(second) {
		t.Errorf("show --json after the takeover = %q; want attempt 2, a fence above %v, the second token", out, fence1)
	}
	_, out, _ = ctl(t, b, "-raw", "show", "k")
	if !strings.Contains(out, "attempt:") || !strings.Contains(out, "2 (taken over once") || !strings.Contains(out, "fence:") {
		t.Errorf("show = %q; want its attempt (2, taken over once) and fence", out)
	}
	_, out, _ = ctl(t, b, "-raw", "list", "--state", "in_progress")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 3 || !strings.Contains(rows[0], "ATTEMPT") || !strings.Contains(rows[0], "FENCE") {
		t.Fatalf("list table = %q; want a header with ATTEMPT and FENCE and two rows", out)
	}
	for _, row := range rows[1:] {
		f := strings.Fields(row)
		want := "1"
		if f[0] == "k" {
			want = "2"
		}
		// WHEN is two words ("in 3m0s"): count the columns from the end.
		if len(f) < 8 || f[len(f)-4] != want {
			t.Errorf("list row %q: want attempt %s in the fourth column from the end", row, want)
		}
	}
	// The first holder's late Complete is refused: the table said why.
	if err := m.Complete(t.Context(), "k", first, []byte("late"), time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the first holder's Complete after the takeover = %v, want ErrLeaseLost", err)
	}
}
