package store_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

// fakeStore records what the opener was given and whether it was closed and
// migrated.
type fakeStore struct {
	store.Store
	table    string
	closed   int
	migrated int
}

func (f *fakeStore) Close() error                  { f.closed++; return nil }
func (f *fakeStore) Migrate(context.Context) error { f.migrated++; return nil }

type plainStore struct{ store.Store }

var lastFake *fakeStore

func init() {
	store.Register("Fake-Test", func(ctx context.Context, u *url.URL) (store.Store, error) {
		p := store.NewURLParams(u)
		table := p.String("table", "idempotency_keys")
		_ = p.Int("batch", 1)
		_ = p.Duration("wait", time.Second)
		_ = p.Bool("check", true)
		if err := p.Done(); err != nil {
			return nil, err
		}
		lastFake = &fakeStore{table: table}
		return lastFake, nil
	})
	store.Register("plain-test", func(ctx context.Context, u *url.URL) (store.Store, error) {
		return plainStore{}, nil
	})
}

func TestOpenDispatchesOnScheme(t *testing.T) {
	s, err := store.Open(t.Context(), "FAKE-test://host/x?table=t1&batch=3&wait=2s&check=false")
	if err != nil {
		t.Fatal(err)
	}
	if s != lastFake || lastFake.table != "t1" {
		t.Fatalf("Open returned %v, want the fake with table t1 (got %+v)", s, lastFake)
	}
	if err := store.Migrate(t.Context(), s); err != nil || lastFake.migrated != 1 {
		t.Fatalf("Migrate = %v, migrated %d times", err, lastFake.migrated)
	}
	if err := store.Close(s); err != nil || lastFake.closed != 1 {
		t.Fatalf("Close = %v, closed %d times", err, lastFake.closed)
	}
	// A Store with neither method: both helpers do nothing.
	p, err := store.Open(t.Context(), "plain-test://")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(p); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(nil); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRejects(t *testing.T) {
	for _, tc := range []struct{ name, url, want string }{
		{"unknown scheme", "nosuch://x", `unknown URL scheme "nosuch"`},
		{"unknown scheme names the import", "postgresx://x", `store/postgres`},
		{"no scheme", "just-a-path", "has no scheme"},
		{"malformed", "fake-test://%zz", "malformed URL"},
		{"unknown parameter", "fake-test://?tabel=x", "unknown parameter(s) tabel"},
		{"repeated parameter", "fake-test://?table=a&table=b", `"table" given 2 times`},
		{"bad integer", "fake-test://?batch=many", `batch="many": not an integer`},
		{"bad duration", "fake-test://?wait=5", `wait="5": not a duration`},
		{"bad bool", "fake-test://?check=maybe", `check="maybe": not true or false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lastFake = nil
			s, err := store.Open(t.Context(), tc.url)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("Open(%q) = %v, %v; want an error matching ErrInvalid", tc.url, s, err)
			}
			if s != nil || lastFake != nil {
				t.Fatalf("Open(%q) made a store despite the error", tc.url)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "store: open") {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestOpenHidesPassword(t *testing.T) {
	_, err := store.Open(t.Context(), "fake-test://user:secret@host/?bogus=1")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v shows the password", err)
	}
}

func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := store.Open(ctx, "fake-test://")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled ctx = %v", err)
	}
}

func TestRegisterPanics(t *testing.T) {
	open := func(context.Context, *url.URL) (store.Store, error) { return nil, nil }
	for name, f := range map[string]func(){
		"duplicate":    func() { store.Register("fake-test", open) },
		"empty scheme": func() { store.Register("", open) },
		"nil opener":   func() { store.Register("other-test", nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register did not panic")
				}
			}()
			f()
		})
	}
	got := strings.Join(store.Schemes(), ",")
	if !strings.Contains(got, "fake-test") || strings.Contains(got, "other-test") {
		t.Fatalf("Schemes() = %s", got)
	}
}
