package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
)

func postWithKey(t *testing.T, url, key, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", `"`+key+`"`)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	return resp, string(b)
}

// A header changed after WriteHeader is not sent, first time or replayed:
// the client gets the header as it stood at WriteHeader, as net/http sends
// it (the recorder's header snapshot, and its swap at commit).
func TestHeaderAsAtWriteHeader(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { s.Close() })
	mw := mustNew(t, s, idem.WithWait(10*time.Second)) // the replay waits for the record
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-A", "at-write-header")
		w.Header().Add("X-Multi", "1")
		w.Header().Add("X-Multi", "2")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("X-A", "changed-later")
		w.Header()["X-Multi"][1] = "changed-in-place"
		w.Header().Set("X-B", "set-later")
		io.WriteString(w, "body")
	})))
	defer srv.Close()
	for i, want := range []string{"", "true"} {
		resp, body := postWithKey(t, srv.URL, "k", "{}")
		assert.Equal(t, want, resp.Header.Get(httpidem.ReplayedHeader), "request %d", i)
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
		assert.Equal(t, "body", body)
		assert.Equal(t, "at-write-header", resp.Header.Get("X-A"), "request %d", i)
		assert.Equal(t, []string{"1", "2"}, resp.Header.Values("X-Multi"), "request %d", i)
		assert.Empty(t, resp.Header.Get("X-B"), "request %d", i)
		assert.Equal(t, "4", resp.Header.Get("Content-Length"), "request %d", i)
	}
}

// Concurrent requests through the pooled recorders never see each other's
// header or body, first time or replayed.
func TestPooledRecordersDoNotMix(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { s.Close() })
	// The client has its answer before the key is recorded: the retry
	// waits for the record.
	mw := mustNew(t, s, idem.WithWait(10*time.Second))
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", string(b))
		if len(b)%2 == 0 {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, strings.Repeat(string(b), 1+len(b)%5))
	})))
	defer srv.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				id := fmt.Sprintf("g%d-i%d", g, i)
				for round := range 2 {
					resp, body := postWithKey(t, srv.URL, id, id)
					assert.Equal(t, id, resp.Header.Get("X-Echo"), "%s round %d", id, round)
					assert.Equal(t, strings.Repeat(id, 1+len(id)%5), body, "%s round %d", id, round)
					assert.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"))
				}
			}
		})
	}
	wg.Wait()
}
