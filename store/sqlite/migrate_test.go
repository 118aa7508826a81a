package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/sqlite"
)

// oldDDL is the table and index as this package made them before the
// attempt and fence columns (git show 4991328:store/sqlite/schema.go).
const oldDDL = `CREATE TABLE IF NOT EXISTS "idempotency_keys" (
	key          TEXT    NOT NULL PRIMARY KEY,
	fingerprint  TEXT    NOT NULL,
	token        TEXT    NOT NULL,
	status       INTEGER NOT NULL,
	response     BLOB,
	locked_until INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS "idempotency_keys_expires_at_idx" ON "idempotency_keys" (expires_at);`

// oldTable makes a database file with the old table, holding a live lease
// ("live", token "tok-live"), a completed record ("done"), a lapsed lease
// ("lapsed") and an expired completed record ("expired"), as of now.
func oldTable(t *testing.T, now time.Time) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(oldDDL)
	require.NoError(t, err)
	us := now.UnixMicro()
	hour := time.Hour.Microseconds()
	_, err = db.Exec(`INSERT INTO idempotency_keys (key, fingerprint, token, status, response, locked_until, expires_at) VALUES
	('live', 'fp', 'tok-live', 1, NULL, ?1, ?1),
	('done', 'fp', 'tok-done', 2, X'6F6B', 0, ?1),
	('lapsed', 'fp', 'tok-lapsed', 1, NULL, ?2, ?2),
	('expired', 'fp', 'tok-expired', 2, X'6F6B', 0, ?2)`, us+hour, us-1)
	require.NoError(t, err)
	return path
}

type tableColumn struct {
	name, typ, dflt string
	notNull         bool
}

func columns(t *testing.T, db *sql.DB) map[string]tableColumn {
	t.Helper()
	rows, err := db.Query(`SELECT name, type, "notnull", coalesce(dflt_value, '') FROM pragma_table_info('idempotency_keys')`)
	require.NoError(t, err)
	defer rows.Close()
	cols := map[string]tableColumn{}
	for rows.Next() {
		var c tableColumn
		require.NoError(t, rows.Scan(&c.name, &c.typ, &c.notNull, &c.dflt))
		_, dup := cols[c.name]
		require.False(t, dup, "column %s twice", c.name)
		cols[c.name] = c
	}
	require.NoError(t, rows.Err())
	return cols
}

// Migrate upgrades a table of the previous version in place: the rows
// stay, read as Attempt 0 and Fence 0, and claims count from them.
func TestMigrateUpgradesOldTable(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	clock := func() time.Time { return now }
	path := oldTable(t, now)
	ctx := t.Context()

	// Open accepts the old table (Migrate will upgrade it); a claim before
	// Migrate says what to do.
	s, err := sqlite.Open(path, sqlite.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.Claim(ctx, "new", "fp", store.NewToken(), time.Minute)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run Migrate")
	err = s.InTx(ctx, func(ctx context.Context, st store.Store) error {
		_, err := st.Claim(ctx, "new", "fp", store.NewToken(), time.Minute)
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run Migrate")
	assert.Len(t, columns(t, s.DB()), 7, "Open changed nothing")

	require.NoError(t, s.Migrate(ctx))
	cols := columns(t, s.DB())
	require.Len(t, cols, 9)
	for _, name := range []string{"attempt", "fence"} {
		assert.Equal(t, tableColumn{name: name, typ: "INTEGER", dflt: "0", notNull: true}, cols[name])
	}
	require.NoError(t, s.Migrate(ctx), "again: nothing to do")
	assert.Len(t, columns(t, s.DB()), 9)

	// The old rows read, with Attempt 0 and Fence 0.
	live, err := s.Get(ctx, "live")
	require.NoError(t, err)
	assert.Equal(t, store.Token("tok-live"), live.Token)
	assert.Equal(t, store.StatusInProgress, live.Status)
	assert.Zero(t, live.Attempt)
	assert.Zero(t, live.Fence)
	done, err := s.Get(ctx, "done")
	require.NoError(t, err)
	assert.Equal(t, []byte("ok"), done.Response)
	assert.Zero(t, done.Attempt)
	e, err := s.Lookup(ctx, "lapsed")
	require.NoError(t, err)
	assert.Equal(t, store.StateLapsed, e.State)
	assert.Zero(t, e.Attempt)
	assert.Zero(t, e.Fence)
	c, err := s.Claim(ctx, "done", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Completed, c.Outcome)

	// Claims over old rows count as store.Successor says.
	c, err = s.Claim(ctx, "lapsed", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.Equal(t, uint32(2), c.Record.Attempt, "a takeover of an old lapsed lease")
	assert.Equal(t, uint64(now.UnixMicro()), c.Record.Fence)
	assert.True(t, c.Takeover())
	c, err = s.Claim(ctx, "expired", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.Equal(t, uint32(1), c.Record.Attempt, "over an old expired record")
	assert.Equal(t, uint64(now.UnixMicro()), c.Record.Fence)
	c, err = s.Claim(ctx, "live", "fp", "tok-live", time.Minute)
	require.NoError(t, err)
	require.Equal(t, store.Acquired, c.Outcome)
	assert.Zero(t, c.Record.Attempt, "a re-entrant claim keeps the old row's")
	require.NoError(t, s.Renew(ctx, "live", "tok-live", time.Hour))
	require.NoError(t, s.Complete(ctx, "live", "tok-live", []byte("r"), time.Hour))
	c, err = s.Claim(ctx, "new", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint32(1), c.Record.Attempt)

	// A Store opened on the upgraded table prepares and works at once.
	s2, err := sqlite.Open(path, sqlite.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { s2.Close() })
	got, err := s2.Get(ctx, "lapsed")
	require.NoError(t, err)
	assert.Equal(t, uint32(2), got.Attempt)
}

// Migrate on a Store made with New, on a pool whose transactions begin
// DEFERRED, upgrades too.
func TestMigrateUpgradesOldTableNew(t *testing.T) {
	path := oldTable(t, time.Now())
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	s, err := sqlite.New(db)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Migrate(t.Context()))
	assert.Len(t, columns(t, db), 9)
	c, err := s.Claim(t.Context(), "lapsed", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, uint32(2), c.Record.Attempt)
}

// On ":memory:" (one connection) the upgrade runs on the connection the
// table is on.
func TestMigrateUpgradesOldTableMemory(t *testing.T) {
	s, err := sqlite.Open(":memory:")
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.DB().Exec(oldDDL)
	require.NoError(t, err)
	_, err = s.DB().Exec(`INSERT INTO idempotency_keys VALUES ('old', 'fp', 'tok', 1, NULL, 1, 1)`)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(t.Context()))
	assert.Len(t, columns(t, s.DB()), 9)
	c, err := s.Claim(t.Context(), "old", "fp", store.NewToken(), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, store.Acquired, c.Outcome)
	assert.Equal(t, uint32(2), c.Record.Attempt, "a takeover of the old lapsed lease")
}

// Several Stores, each with its own pool (as several processes would
// have), some beginning IMMEDIATE and some DEFERRED, upgrade one old table
// at once: every Migrate succeeds and each column is added once.
func TestMigrateConcurrently(t *testing.T) {
	for round := range 5 {
		path := oldTable(t, time.Now())
		var stores []*sqlite.Store
		for i := range 6 {
			var s *sqlite.Store
			if i%2 == 0 {
				var err error
				s, err = sqlite.Open(path)
				require.NoError(t, err)
			} else {
				db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				s, err = sqlite.New(db)
				require.NoError(t, err)
			}
			t.Cleanup(func() { s.Close() })
			stores = append(stores, s)
		}
		start := make(chan struct{})
		errs := make([]error, len(stores))
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				errs[i] = s.Migrate(t.Context())
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, store %d", round, i)
		}
		assert.Len(t, columns(t, stores[0].DB()), 9)
		for i, s := range stores {
			c, err := s.Claim(t.Context(), fmt.Sprintf("k%d", i), "fp", store.NewToken(), time.Minute)
			require.NoError(t, err)
			assert.Equal(t, uint32(1), c.Record.Attempt)
		}
	}
}

// migrateEnv makes the test binary a child that migrates the file it
// names, once every child is ready (see TestMigrateFromProcesses).
const migrateEnv = "IDEMKIT_SQLITE_MIGRATE_CHILD"

func migrateChild(path string) {
	s, err := sqlite.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := os.WriteFile(fmt.Sprintf("%s.ready.%d", path, os.Getpid()), nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path + ".go"); err == nil {
			break
		}
	}
	if err := s.Migrate(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Processes upgrading one old table at once all succeed.
func TestMigrateFromProcesses(t *testing.T) {
	path := oldTable(t, time.Now())
	const n = 3
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range n {
		cmds[i] = exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), migrateEnv+"="+path)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		require.NoError(t, cmds[i].Start())
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		ready, err := filepath.Glob(path + ".ready.*")
		require.NoError(t, err)
		if len(ready) == n {
			break
		}
		require.True(t, time.Now().Before(deadline), "children not ready: %d of %d", len(ready), n)
	}
	require.NoError(t, os.WriteFile(path+".go", nil, 0o600))
	for i, cmd := range cmds {
		assert.NoError(t, cmd.Wait(), "child %d: %s", i, outs[i].String())
	}
	s := openPath(t, path)
	assert.Len(t, columns(t, s.DB()), 9)
	got, err := s.Get(t.Context(), "live")
	require.NoError(t, err)
	assert.Zero(t, got.Attempt)
}
