package httpidem

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// ErrUnauthenticated may be wrapped by the WithScope function's error to
// answer 401 instead of 500: the request carries no identity to scope by.
var ErrUnauthenticated = errors.New("httpidem: unauthenticated")

// replayedTrue is shared by every replay; net/http only reads it.
var replayedTrue = []string{"true"}

type middleware struct {
	options
	store   store.Store
	tx      store.Transactor // nil in lease mode
	headers headerPolicy
}

// New returns middleware that makes the wrapped handler safe to retry with
// the Idempotency-Key header, remembering keys in s. See the package
// documentation for what it answers and when.
//
// When s implements store.Transactor (and WithLeaseMode is not given), each
// first request runs in one database transaction: claim, handler, stored
// response. Otherwise it uses leases.
func New(s store.Store, opts ...Option) func(http.Handler) http.Handler {
	m := &middleware{options: defaults(), store: s}
	for _, o := range opts {
		o(&m.options)
	}
	if m.fp == nil {
		m.fp = keyer.NewFingerprinter()
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	m.headers = newHeaderPolicy(m.allow, m.deny)
	if tx, ok := s.(store.Transactor); ok && !m.leaseMode {
		m.tx = tx
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(w, r, next)
		})
	}
}

func (m *middleware) emit(e Event) {
	if m.hook != nil {
		m.hook(e)
	}
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.methods[r.Method] {
		next.ServeHTTP(w, r)
		return
	}
	if m.store == nil {
		m.logger.ErrorContext(r.Context(), "httpidem: New was given a nil store")
		writeProblem(w, http.StatusInternalServerError, CodeStoreUnavailable, "The idempotency store is not configured.", 0)
		return
	}
	key, err := keyer.Parse(r.Header)
	if err != nil {
		if errors.Is(err, keyer.ErrNoKey) {
			if m.optionalKey {
				next.ServeHTTP(w, r)
				return
			}
			writeProblem(w, http.StatusBadRequest, CodeKeyMissing, "This request requires an Idempotency-Key header.", 0)
			return
		}
		writeProblem(w, http.StatusBadRequest, CodeKeyMalformed, detailOf(err), 0)
		return
	}
	var scope []string
	if m.scope != nil {
		if scope, err = m.scope(r); err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				writeProblem(w, http.StatusUnauthorized, CodeScope, "Idempotency keys are scoped to the caller, and this request is not authenticated.", 0)
				return
			}
			m.logger.ErrorContext(r.Context(), "httpidem: scope function failed", "err", err)
			writeProblem(w, http.StatusInternalServerError, CodeScope, "The server could not determine the scope of the idempotency key.", 0)
			return
		}
	}
	skey, err := keyer.ScopedKey(key, scope...)
	if err != nil {
		m.logger.ErrorContext(r.Context(), "httpidem: cannot scope key", "err", err)
		writeProblem(w, http.StatusInternalServerError, CodeScope, "The server could not scope the idempotency key.", 0)
		return
	}
	fp, err := m.fp.Fingerprint(r)
	if err != nil {
		if errors.Is(err, keyer.ErrBodyTooLarge) {
			writeProblem(w, http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
				"The request body is larger than "+strconv.FormatInt(m.fp.MaxBody(), 10)+" bytes, the limit for idempotent requests.", 0)
			return
		}
		if r.Context().Err() != nil {
			return // the client went away while sending the body
		}
		writeProblem(w, http.StatusBadRequest, CodeBodyUnreadable, "The request body could not be read.", 0)
		return
	}
	if m.tx != nil {
		m.serveTx(w, r, next, skey, fp)
		return
	}
	m.serveLease(w, r, next, skey, fp)
}

// detailOf returns a *keyer.KeyError's client-facing detail.
func detailOf(err error) string {
	var ke *keyer.KeyError
	if errors.As(err, &ke) {
		return ke.Detail + "."
	}
	return "The Idempotency-Key header is malformed."
}

// outcome interprets a claim. A Mismatch against a fingerprint of another
// algorithm version is not evidence of a different request (the two cannot
// be compared), so it is taken as a match of the record's state.
func outcome(c store.Claim, fp string) store.Outcome {
	if c.Outcome == store.Mismatch && fpVersion(c.Record.Fingerprint) != fpVersion(fp) {
		switch c.Record.Status {
		case store.StatusCompleted:
			return store.Completed
		case store.StatusInProgress:
			return store.InProgress
		}
	}
	return c.Outcome
}

func fpVersion(fp string) string {
	v, _, ok := strings.Cut(fp, ":")
	if !ok {
		return ""
	}
	return v
}

// duplicate answers a claim that did not acquire the key: replay, 422, or
// 409 (the caller handles waiting before it gives up).
func (m *middleware) duplicate(w http.ResponseWriter, r *http.Request, key string, c store.Claim, o store.Outcome) {
	switch o {
	case store.Completed:
		m.replay(w, r, key, c.Record)
	case store.Mismatch:
		m.emit(Event{Kind: Mismatch, Request: r, Key: key, Status: http.StatusUnprocessableEntity})
		writeProblem(w, http.StatusUnprocessableEntity, CodeKeyMismatch,
			"This Idempotency-Key was already used with a different request (method, path, or body). Use a new key for a new request.", 0)
	default: // store.InProgress
		m.emit(Event{Kind: Conflict, Request: r, Key: key, Status: http.StatusConflict})
		writeProblem(w, http.StatusConflict, CodeInProgress,
			"A request with this Idempotency-Key is still being processed. Retry after a moment.", m.retryAfter(c.Record.LockedUntil))
	}
}

// retryAfter turns a lease's end into whole seconds, at least 1.
func (m *middleware) retryAfter(until time.Time) int {
	d := until.Sub(m.now())
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

func (m *middleware) replay(w http.ResponseWriter, r *http.Request, key string, rec store.Record) {
	h := w.Header()
	status, body, err := decodeResponse(rec.Response, h)
	if err != nil {
		m.logger.ErrorContext(r.Context(), "httpidem: stored response unreadable", "key", key, "err", err)
		writeProblem(w, http.StatusInternalServerError, CodeStoredResponse, "The stored response for this Idempotency-Key cannot be read.", 0)
		return
	}
	h[ReplayedHeader] = replayedTrue
	m.emit(Event{Kind: Replayed, Request: r, Key: key, Status: status})
	w.WriteHeader(status)
	w.Write(body)
}

// storeFailed answers a failed first Claim: 503, or the handler unprotected
// with WithFailOpen. A cancelled request gets nothing: the client is gone.
func (m *middleware) storeFailed(w http.ResponseWriter, r *http.Request, next http.Handler, key string, err error) {
	if r.Context().Err() != nil {
		return
	}
	m.emit(Event{Kind: StoreError, Request: r, Key: key, Err: err})
	if m.failOpen {
		m.logger.WarnContext(r.Context(), "httpidem: store failed; running the handler without idempotency (fail open)", "key", key, "err", err)
		next.ServeHTTP(w, r)
		return
	}
	m.logger.ErrorContext(r.Context(), "httpidem: store failed", "key", key, "err", err)
	writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "The idempotency store is unavailable; the request was not processed. Retry later with the same key.", 1)
}

// waitStep sleeps before the next poll of an in-progress key. It reports
// false when the wait is over (deadline passed, or the client went away).
func (m *middleware) waitStep(r *http.Request, key string, deadline time.Time, attempt int) bool {
	left := time.Until(deadline)
	if left <= 0 {
		return false
	}
	if attempt == 0 {
		m.emit(Event{Kind: Waiting, Request: r, Key: key})
	}
	d := min(5*time.Millisecond<<min(attempt, 5), 100*time.Millisecond, left)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// afterCtx is the context for store calls made after the handler starts
// (Complete, Release, renewals): it keeps the request's values but not its
// cancellation, so a client that goes away cannot leave a key neither stored
// nor released. Those calls are bounded by the store's own timeouts (a
// driver's dial, read and statement timeouts), not by the request.
func afterCtx(r *http.Request) context.Context {
	return context.WithoutCancel(r.Context())
}
