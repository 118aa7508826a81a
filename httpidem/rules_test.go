package httpidem_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/httpidem"
)

// TestStoredResponseIsWhatHandlerWrote: the client hangs up after 32 KiB of
// an 800 KiB response; the handler goes on writing. The replay must be the
// whole response, not what the dead connection accepted.
func TestStoredResponseIsWhatHandlerWrote(t *testing.T) {
	const total = 800 << 10
	chunk := strings.Repeat("x", 8<<10)
	settled := make(chan struct{}, 1)
	clientGone := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		for i := 0; i < total/len(chunk); i++ {
			if i == 8 {
				<-clientGone
			}
			io.WriteString(w, chunk) // errors ignored, as many handlers do
			w.(http.Flusher).Flush()
		}
	})
	mw := mustNew(t, newFakeStore(), (func(event))(func(e event) {
		if e.Kind == evStored {
			settled <- struct{}{}
		}
	}))(h)
	srv := httptest.NewServer(mw)
	defer srv.Close()

	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", `"k"`)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = io.ReadFull(resp.Body, make([]byte, 32<<10))
	require.NoError(t, err)
	resp.Body.Close() // hang up mid-response
	http.DefaultClient.CloseIdleConnections()
	close(clientGone)
	<-settled

	req, _ = http.NewRequest("POST", srv.URL, strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", `"k"`)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "true", resp.Header.Get(httpidem.ReplayedHeader))
	assert.Equal(t, 201, resp.StatusCode)
	assert.Len(t, body, total, "the replay is what the handler wrote")
}

// TestTxBufferIsBounded: a transactional handler streams 64 MiB against a
// 64 KiB limit. Its context is cancelled, nothing commits, the client gets
// the 500 problem, and memory stays bounded while it streams.
func TestTxBufferIsBounded(t *testing.T) {
	const limit = 64 << 10
	const streamed = 64 << 20
	s := newFakeTxStore()
	chunk := make([]byte, 32<<10)
	var grew uint64
	var cause error
	var failedWrites atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l, ok := ledgerFrom(r.Context()); ok {
			l.Add("effect")
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w.WriteHeader(200)
		for sent := 0; sent < streamed; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil { // a handler that ignores failures
				failedWrites.Add(1)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if after.HeapAlloc > before.HeapAlloc {
			grew = after.HeapAlloc - before.HeapAlloc
		}
		cause = context.Cause(r.Context())
	})
	w := serve(mustNew(t, s, httpidem.WithMaxResponse(limit))(h), newReq(`{}`, "k"))
	requireProblem(t, w, 500, httpidem.CodeResponseTooLarge)
	assert.Empty(t, s.committed(), "rolled back")
	assert.Less(t, grew, uint64(8<<20), "heap grew by %d bytes while 64 MiB streamed", grew)
	assert.Positive(t, failedWrites.Load(), "writes past the limit fail")
	assert.Error(t, cause, "the handler's context is cancelled past the limit")
}

// Test1xxNeverStoredAsFinal: informational statuses are passed on but
// never kept as the final answer; a 101 is recorded as done without a
// response (a retry gets 410, not a 500 for the whole retention, and not a
// second run).
func Test1xxNeverStoredAsFinal(t *testing.T) {
	t.Run("103 then 201", func(t *testing.T) {
		mw := mustNew(t, newFakeStore())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(201)
			io.WriteString(w, "made")
		}))
		serve(mw, newReq(`{}`, "k"))
		w := serve(mw, newReq(`{}`, "k"))
		assert.Equal(t, 201, w.Code)
		assert.Equal(t, "made", w.Body.String())
	})
	t.Run("101", func(t *testing.T) {
		var runs atomic.Int32
		mw := mustNew(t, newFakeStore())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.WriteHeader(http.StatusSwitchingProtocols)
		}))
		serve(mw, newReq(`{}`, "k"))
		requireProblem(t, serve(mw, newReq(`{}`, "k")), http.StatusGone, httpidem.CodeResponseNotKept)
		assert.EqualValues(t, 1, runs.Load())
	})
	t.Run("tx: 101 is not final", func(t *testing.T) {
		mw := mustNew(t, newFakeTxStore())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusSwitchingProtocols)
			w.WriteHeader(202)
		}))
		serve(mw, newReq(`{}`, "k"))
		assert.Equal(t, 202, serve(mw, newReq(`{}`, "k")).Code)
	})
}

// TestTrailersFollowHeaderPolicy: trailers are kept and replayed as
// trailers, and judged by their own names: a Set-Cookie trailer is never
// kept, however it is set.
func TestTrailersFollowHeaderPolicy(t *testing.T) {
	for _, mode := range []string{"lease", "tx"} {
		t.Run(mode, func(t *testing.T) {
			var st = newFakeStore()
			var mw func(http.Handler) http.Handler
			if mode == "tx" {
				mw = mustNew(t, newFakeTxStore())
			} else {
				mw = mustNew(t, st)
			}
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "X-Checksum, Set-Cookie")
				w.WriteHeader(201)
				io.WriteString(w, "body")
				w.Header().Set("X-Checksum", "abc")
				w.Header().Set("Set-Cookie", "session=first-callers")
				w.Header().Set(http.TrailerPrefix+"Set-Cookie", "other=first-callers")
			})))
			defer srv.Close()
			post := func() *http.Response {
				req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", `"k"`)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				_, err = io.ReadAll(resp.Body)
				require.NoError(t, err)
				resp.Body.Close()
				return resp
			}
			post()
			resp := post()
			assert.Equal(t, "true", resp.Header.Get(httpidem.ReplayedHeader))
			assert.Equal(t, "abc", resp.Trailer.Get("X-Checksum"), "an allowed trailer is replayed as a trailer")
			assert.Empty(t, resp.Trailer.Values("Set-Cookie"), "a cookie trailer is never replayed")
			assert.Empty(t, resp.Header.Values("Set-Cookie"))
		})
	}
}

// TestNoWriteAroundTheCapture: the lease-mode writer has no Unwrap (a
// handler cannot write to the client behind the capture), yet
// http.ResponseController still reaches deadlines, full duplex and Flush.
func TestNoWriteAroundTheCapture(t *testing.T) {
	var hasUnwrap bool
	var deadlineErr, flushErr, duplexErr error
	mw := mustNew(t, newFakeStore())
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, hasUnwrap = w.(interface{ Unwrap() http.ResponseWriter })
		rc := http.NewResponseController(w)
		deadlineErr = rc.SetWriteDeadline(time.Now().Add(time.Minute))
		duplexErr = rc.EnableFullDuplex()
		w.WriteHeader(201)
		io.WriteString(w, "first")
		flushErr = rc.Flush()
		_, _, herr := rc.Hijack()
		if !errors.Is(herr, http.ErrNotSupported) {
			t.Errorf("Hijack: %v, want ErrNotSupported", herr)
		}
	})))
	defer srv.Close()
	get := func() (string, string) {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nIdempotency-Key: \"k\"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		return resp.Status, string(b)
	}
	st1, b1 := get()
	st2, b2 := get()
	assert.False(t, hasUnwrap)
	assert.NoError(t, deadlineErr)
	assert.NoError(t, flushErr)
	assert.NoError(t, duplexErr)
	assert.Equal(t, st1, st2)
	assert.Equal(t, b1, b2, "the replay is what the first caller received")
}

// TestCompleteRetriedAfterHandler: the store fails between the handler and
// Complete (a restart, a pause) for 300 ms; Complete is retried while the
// lease holds, and the retry replays instead of paying again.
func TestCompleteRetriedAfterHandler(t *testing.T) {
	s := newFakeStore()
	var runs atomic.Int32
	mw := mustNew(t, s)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		s.set(func(f *fakeStore) { f.completeErr = errDown })
		time.AfterFunc(300*time.Millisecond, func() { s.set(func(f *fakeStore) { f.completeErr = nil }) })
		w.WriteHeader(201)
		io.WriteString(w, "paid")
	}))
	w := serve(mw, newReq(`{}`, "k"))
	require.Equal(t, 201, w.Code)
	w = serve(mw, newReq(`{}`, "k"))
	assert.Equal(t, "true", w.Header().Get(httpidem.ReplayedHeader))
	assert.Equal(t, "paid", w.Body.String())
	assert.EqualValues(t, 1, runs.Load(), "never a second payment")
}
