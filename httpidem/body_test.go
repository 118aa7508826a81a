package httpidem_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// echoBody answers 201 with the body it read, after reading it a second
// time from the start (Seek) through io.Copy (WriteTo), so that both ways
// of reading a body are checked against the first.
var echoBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	first, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
		return
	}
	if s, ok := r.Body.(io.Seeker); ok {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			http.Error(w, "seek: "+err.Error(), http.StatusBadRequest)
			return
		}
		var again bytes.Buffer
		if _, err := io.Copy(&again, r.Body); err != nil || !bytes.Equal(again.Bytes(), first) {
			http.Error(w, "read again: not the same body", http.StatusBadRequest)
			return
		}
	}
	w.WriteHeader(http.StatusCreated)
	w.Write(first)
})

// The handler reads the whole body, in every mode, twice if it seeks back;
// bodies of every size go through the pooled buffers without mixing.
func TestHandlerReadsBody(t *testing.T) {
	allStores(t, func(t *testing.T, s store.Store) {
		h := mustNew(t, s)(echoBody)
		for i, body := range []string{"", "{}", strings.Repeat("x", 4095), strings.Repeat("y", 70<<10), "{\"a\":1}"} {
			w := serve(h, newReq(body, `"body-`+string(rune('a'+i))+`"`))
			require.Equal(t, http.StatusCreated, w.Code, "body of %d bytes: %s", len(body), w.Body.String())
			assert.Equal(t, body, w.Body.String(), "body of %d bytes", len(body))
		}
	})
}

// With WithFailOpen and the store down, the handler runs unprotected and
// still reads the whole body the fingerprint read.
func TestFailOpenHandlerReadsBody(t *testing.T) {
	modes(t, func(t *testing.T, s store.Store) {
		fakeOf(s).set(func(f *fakeStore) { f.claimErr = errDown })
		w := serve(mustNew(t, s, httpidem.WithFailOpen())(echoBody), newReq(`{"amount":42}`, "k"))
		require.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		assert.Equal(t, `{"amount":42}`, w.Body.String())
	})
}

// A handler that keeps its request body past its return (net/http forbids
// reading it then) reads nothing from it: not the next request's body,
// which the recycled buffer holds.
func TestReadBodyAfterReturnReadsNothing(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { s.Close() })
	mw := mustNew(t, s, idem.WithWait(10*time.Second))
	var (
		mu   sync.Mutex
		kept io.Reader // the first request's body, kept past its return
	)
	inB, releaseB := make(chan struct{}), make(chan struct{})
	srv := httptest.NewUnstartedServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := kept == nil
		if first {
			kept = r.Body // unread
		}
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusCreated)
			return
		}
		b, err := io.ReadAll(r.Body)
		close(inB)
		<-releaseB
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	})))
	// A connection goes idle once the middleware's ServeHTTP returned, so
	// after its run was released: a's client may have its answer before.
	idle := make(chan struct{}, 16)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateIdle {
			idle <- struct{}{}
		}
	}
	srv.Start()
	defer srv.Close()
	resp, _ := postWithKey(t, srv.URL, "a", "SECRET OF A")
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	<-idle

	done := postAsync(srv.URL, "b", "SECRET OF B", nil)
	<-inB // b's handler runs, its body in a buffer that may be a's, recycled
	mu.Lock()
	late, err := io.ReadAll(kept)
	mu.Unlock()
	assert.Empty(t, late, "a read after the handler returned must read nothing")
	assert.Error(t, err, "a read after the handler returned must fail")
	close(releaseB)
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, "SECRET OF B", got.body, "b's handler read b's whole body")
}

// A body over the limit is answered 413 in lease mode without breaking the
// pooled buffers: the next requests read their own bodies.
func TestBodyTooLargeKeepsPoolSound(t *testing.T) {
	s := mustMemory(t)
	t.Cleanup(func() { s.Close() })
	fp, err := keyer.NewFingerprinter(keyer.WithMaxBody(64))
	require.NoError(t, err)
	h := mustNew(t, s, httpidem.WithFingerprinter(fp))(echoBody)
	big := newReq(strings.Repeat("z", 65), `"big"`)
	big.ContentLength = -1 // read to the limit, not refused by its length
	w := serve(h, big)
	requireProblem(t, w, http.StatusRequestEntityTooLarge, httpidem.CodeBodyTooLarge)
	for i := range 20 {
		body := strings.Repeat(string(rune('a'+i)), i)
		w := serve(h, newReq(body, `"small-`+string(rune('a'+i))+`"`))
		require.Equal(t, http.StatusCreated, w.Code)
		assert.Equal(t, body, w.Body.String())
	}
}
