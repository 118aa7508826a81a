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

// reply is what a client got: the response body, or the error.
type reply struct {
	body string
	err  error
}

// postAsync POSTs body with key and the extra header to url from a
// goroutine of its own, and sends what the client got on the channel.
func postAsync(url, key, body string, header http.Header) <-chan reply {
	done := make(chan reply, 1)
	go func() {
		req, err := http.NewRequest("POST", url, strings.NewReader(body))
		if err != nil {
			done <- reply{err: err}
			return
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		req.Header.Set("Idempotency-Key", `"`+key+`"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- reply{err: err}
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- reply{string(b), err}
	}()
	return done
}

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

// A handler that keeps its ResponseWriter past its return (net/http
// forbids it) writes nowhere: not into the recycled recorder of the next
// request, whose client and stored response are another's.
func TestWriteAfterReturnGoesNowhere(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { s.Close() })
	mw := mustNew(t, s, idem.WithWait(10*time.Second))
	var (
		mu   sync.Mutex
		kept http.ResponseWriter // the first request's writer, kept past its return
	)
	inB, releaseB := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			close(inB)
			<-releaseB
		}
		mu.Lock()
		if kept == nil {
			kept = w
		}
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "answer "+r.Header.Get("Idempotency-Key"))
	})))
	defer srv.Close()
	_, body := postWithKey(t, srv.URL, "a", "{}")
	require.Equal(t, `answer "a"`, body)

	done := postAsync(srv.URL, "b", "{}", http.Header{"X-Hold": {"1"}})
	<-inB // b's handler runs, on a recorder that may be a's, recycled
	type wrote struct {
		n   int
		err error
	}
	late := make(chan wrote, 1)
	go func() {
		mu.Lock()
		defer mu.Unlock()
		n, err := io.WriteString(kept, " LATE WRITE FROM a")
		late <- wrote{n, err}
	}()
	var n int
	var err error
	select {
	case w := <-late:
		n, err = w.n, w.err
	case <-time.After(5 * time.Second):
		t.Fatal("the late write blocked: it reached another request's writer")
	}
	assert.Zero(t, n)
	assert.Error(t, err, "a write after the handler returned must fail")
	close(releaseB)
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, `answer "b"`, got.body, "b's client got only b's answer")
	_, replay := postWithKey(t, srv.URL, "b", "{}")
	assert.Equal(t, `answer "b"`, replay, "b's stored response is only b's")
}
