package main

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/seal"
)

// sealKeyFile writes a key file with one fresh key and returns its path.
func sealKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seal.keys")
	line := seal.FormatKey("", seal.Key{ID: "demo-1", Secret: seal.NewSecret()})
	require.NoError(t, os.WriteFile(path, []byte("# demo key\n"+line+"\n"), 0o600))
	return path
}

// TestDemoCachedAndSealed runs the seeds' exercise with -cache and
// -seal-key-file on every store: ten parallel POSTs make one payment, a
// retry replays it, another body is refused with 422; and the store keeps
// its optional interfaces (transactional mode on the SQL stores).
func TestDemoCachedAndSealed(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			c := sc.cfg(t)
			c.Wrap = wrapConfig{Cache: true, SealKeyFile: sealKeyFile(t)}
			d := startDemo(t, c)
			_, isTx := d.app.store.(store.Transactor)
			assert.Equal(t, sc.tx, isTx, "the wrapped store is a Transactor exactly when the backend is")
			key := newKey()
			results := make([]result, 10)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = d.post(key, `{"amount":1990}`) })
			}
			wg.Wait()
			replays := 0
			for _, r := range results {
				require.Equal(t, http.StatusCreated, r.status, "body %s", r.body)
				assert.Equal(t, results[0].payment, r.payment)
				if r.replayed {
					replays++
				}
			}
			assert.Equal(t, 9, replays)
			assert.Equal(t, 1, d.count(), "one payment")
			for range 2 { // from the store, then from the cache
				r := d.post(key, `{ "amount": 1990 }`)
				assert.Equal(t, http.StatusCreated, r.status)
				assert.True(t, r.replayed)
				assert.Equal(t, results[0].payment, r.payment)
			}
			assert.Equal(t, http.StatusUnprocessableEntity, d.post(key, `{"amount":9999}`).status)
			assert.Equal(t, 1, d.count())
		})
	}
}

func TestWrapFlags(t *testing.T) {
	path := sealKeyFile(t)
	cfg, _, err := parseArgs([]string{"-store", "memory", "-cache", "-seal-key-file", path})
	require.NoError(t, err)
	assert.Equal(t, wrapConfig{Cache: true, SealKeyFile: path}, cfg.Wrap)
	cfg.Wrap.SealKeyFile = filepath.Join(t.TempDir(), "missing.keys")
	_, err = wrapStore(cfg.Wrap, nil)
	assert.ErrorContains(t, err, "-seal-key-file")
}
