package httpidem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/fphook"
	"github.com/idemkit/idemkit/internal/invalid"
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
	e       *idem.Engine
	tx      bool             // run in transactional mode
	run     []idem.RunOption // transactional mode's, and lease mode's for a fingerprint of another version
	headers headerPolicy
}

// New returns middleware that makes the wrapped handler safe to retry with
// the Idempotency-Key header, running every request through e, the engine
// that holds the store, lease, wait, retention, logger, key redactor and
// tracer. See the package documentation for what it answers and when.
//
// It uses leases (lease mode) unless WithTransactions (or
// WithTransactionsIfSupported, on a store.Transactor) is given. New fails
// with an error matching store.ErrInvalid for a nil engine, a nil option,
// an option given an invalid value, or WithTransactions on an engine whose
// store is not a store.Transactor.
func New(e *idem.Engine, opts ...Option) (func(http.Handler) http.Handler, error) {
	if e == nil {
		return nil, fmt.Errorf("httpidem: new: nil engine (build one with idem.New): %w", store.ErrInvalid)
	}
	m := &middleware{options: defaults(), e: e}
	if err := invalid.Apply(&m.options, opts); err != nil {
		return nil, fmt.Errorf("httpidem: new: %w", err)
	}
	switch m.options.tx {
	case txAlways:
		if !e.CanTransact() {
			return nil, fmt.Errorf("httpidem: new: WithTransactions needs a store.Transactor, and %T is not one (WithTransactionsIfSupported runs lease mode on it): %w", e.Store(), store.ErrInvalid)
		}
		m.tx = true
	case txIfSupported:
		m.tx = e.CanTransact()
	}
	if m.fp == nil {
		fp, err := keyer.NewFingerprinter()
		if err != nil {
			return nil, fmt.Errorf("httpidem: new: %w", err)
		}
		m.fp = fp
	}
	m.headers = newHeaderPolicy(m.allow, m.deny)
	m.run = []idem.RunOption{idem.WithSameRequest(func(recorded, presented string) bool {
		// A fingerprint of another algorithm version is no evidence of a
		// different request: the two cannot be compared.
		return fpVersion(recorded) != fpVersion(presented)
	})}
	if m.tx {
		m.run = append(m.run, idem.InTx())
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(w, r, next)
		})
	}, nil
}

type requestKey struct{}

// RequestFrom returns the request a run of the middleware serves, from the
// context an idem.Tracer is given (TraceRunStart, TraceRunEnd, TraceEvent),
// so a tracer can name what it reports by method and route. The request is
// there only when the engine has a tracer (idem.WithTracer): without one
// the middleware does not add it.
func RequestFrom(ctx context.Context) (*http.Request, bool) {
	r, ok := ctx.Value(requestKey{}).(*http.Request)
	return r, ok
}

func (m *middleware) logger() *slog.Logger { return m.e.Logger() }

func (m *middleware) redact(key string) string { return m.e.RedactKey(key) }

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if !m.methods[r.Method] && !m.methods[strings.ToUpper(r.Method)] {
		next.ServeHTTP(w, r)
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
			m.logger().ErrorContext(r.Context(), "httpidem: scope function failed", "err", err)
			writeProblem(w, http.StatusInternalServerError, CodeScope, "The server could not determine the scope of the idempotency key.", 0)
			return
		}
	}
	skey, err := keyer.ScopedKey(key, scope...)
	if err != nil {
		m.logger().ErrorContext(r.Context(), "httpidem: cannot scope key", "err", err)
		writeProblem(w, http.StatusInternalServerError, CodeScope, "The server could not scope the idempotency key.", 0)
		return
	}
	// Lease mode reads the body into its pooled run's buffer: the handler
	// gets a reader over it that is cut off when the request ends.
	var l *leaseRun
	var fp string
	if m.tx {
		fp, err = m.fp.Fingerprint(r)
	} else {
		l = leaseRuns.Get().(*leaseRun)
		fp, l.body, err = fphook.Fingerprint(m.fp, r, l.body)
	}
	if err != nil {
		if l != nil {
			l.release()
		}
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
	ctx := r.Context()
	if m.e.Traced() {
		ctx = context.WithValue(ctx, requestKey{}, r) // for RequestFrom
	}
	if m.tx {
		m.serveTx(ctx, w, r, next, skey, fp)
		return
	}
	m.serveLease(ctx, l, w, r, next, skey, fp)
}

// verdict classifies a response the handler produced (both modes): a status
// outside the kept set says the effect did not happen (release, or roll
// back); a response too large or that switched protocols is done but cannot
// be replayed; anything else, an empty response or a client gone included,
// is kept.
func (m *middleware) verdict(status, size int, switched bool, encode func() []byte) idem.Verdict {
	switch {
	case switched:
		return idem.KeepWithoutResponse("101 Switching Protocols cannot be replayed").WithStatus(status)
	case !m.keep(status):
		return idem.Discard("status " + strconv.Itoa(status) + " not kept").WithStatus(status)
	}
	return idem.KeepUpTo(m.maxResponse, size, encode).WithStatus(status)
}

// serveLease is lease mode: the handler's output streams to the client and
// is captured as it goes; the engine renews the lease and settles the key.
// l holds the request's body, read by the fingerprint.
func (m *middleware) serveLease(ctx context.Context, l *leaseRun, w http.ResponseWriter, r *http.Request, next http.Handler, key, fp string) {
	l.m, l.w, l.r, l.next = m, w, r, next
	res, err := m.e.Run(ctx, key, fp, l.work)
	if err == nil && res.Outcome == store.Mismatch && fpVersion(res.Record.Fingerprint) != fpVersion(fp) {
		// Recorded under another version of the fingerprint algorithm:
		// no evidence of a different request. Claim again, taking the
		// record's state for the answer (m.run's WithSameRequest). Only
		// such a claim pays for the option; every other request runs
		// without options, which cost Run about 60 ns to apply.
		res, err = m.e.Run(ctx, key, fp, l.work, m.run...)
	}
	if m.failOpen && errors.Is(err, idem.ErrUnavailable) && hasBody(r) {
		// The handler is about to run unprotected, after l went back to
		// the pool: it reads a copy of the body.
		r = r.WithContext(r.Context())
		r.Body = newHandlerBody(bytes.NewReader(bytes.Clone(l.body)), r.Body)
	}
	l.release()
	m.answer(w, r, next, key, res, err, nil)
}

// hasBody reports whether r has a body to read (one the fingerprint read).
func hasBody(r *http.Request) bool { return r.Body != nil && r.Body != http.NoBody }

// leaseRun is one lease-mode request's state, pooled with its recorder's
// and its body's buffers and with its methods bound once, so that a
// request allocates neither a recorder, nor a body buffer, nor a closure.
type leaseRun struct {
	tw     teeWriter
	body   []byte       // the request's body, read by the fingerprint
	br     bytes.Reader // the handler's reader over body
	hs     *handles     // the handler's own handles on tw and br, cut off at release; nil until run
	m      *middleware
	w      http.ResponseWriter
	r      *http.Request
	next   http.Handler
	work   idem.Work     // l.run
	encode func() []byte // l.encoded
}

var leaseRuns = sync.Pool{New: func() any {
	l := &leaseRun{}
	l.work, l.encode = l.run, l.encoded
	return l
}}

// run is the engine's work: the handler, writing through the recorder and
// reading the body from l's buffer. The handler's handles are set up here,
// not before Run: a replay, the common duplicate, needs none.
func (l *leaseRun) run(wctx context.Context) idem.Verdict {
	tw, r := &l.tw, l.r.WithContext(wctx)
	tw.reset(l.w, l.m.maxResponse)
	hs := &handles{}
	hs.w.t.Store(tw)
	if hasBody(r) {
		l.br.Reset(l.body)
		hs.b.orig = r.Body
		hs.b.r.Store(&l.br)
		r.Body = &hs.b
	}
	l.hs = hs
	l.next.ServeHTTP(&hs.w, r)
	// The client has its whole answer now, whatever recording it takes.
	tw.finish(r.Method)
	return l.m.verdict(tw.finalStatus(), tw.size, tw.switched, l.encode)
}

func (l *leaseRun) encoded() []byte { return l.tw.encoded(&l.m.headers) }

// release returns l to the pool once the engine is done with it (Run
// returned: nothing calls work or encode after that). A recorder or body
// buffer that grew past pooledMax is left to the collector.
func (l *leaseRun) release() {
	ran := l.hs != nil
	if ran {
		// A late write or read by the handler now goes nowhere.
		l.hs.w.t.Store(nil)
		l.hs.b.r.Store(nil)
	}
	l.br.Reset(nil)
	l.m, l.w, l.r, l.next, l.hs = nil, nil, nil, nil, nil
	if cap(l.body) > pooledMax {
		l.body = nil
	}
	l.body = l.body[:0]
	if ran && !l.tw.clear() {
		return
	}
	leaseRuns.Put(l)
}

// answer writes what the engine's result calls for, except the response of
// a handler that ran (lease mode: already sent; transactional mode: sent by
// the caller).
func (m *middleware) answer(w http.ResponseWriter, r *http.Request, next http.Handler, key string, res idem.Result, err error, ran func(idem.Result, error)) {
	switch {
	case res.Outcome == store.Acquired:
		if ran != nil {
			ran(res, err)
		}
	case errors.Is(err, idem.ErrUnavailable):
		m.storeFailed(w, r, next, key, err)
	case err != nil || r.Context().Err() != nil:
		// The client left while waiting, or Run refused its arguments.
		if r.Context().Err() == nil {
			m.logger().ErrorContext(r.Context(), "httpidem: cannot run the request", "key", m.redact(key), "err", err)
			writeProblem(w, http.StatusInternalServerError, CodeStoreUnavailable, "The idempotency key could not be processed.", 0)
		}
	case res.Outcome == store.Completed:
		m.replay(w, r, key, res)
	case res.Outcome == store.Mismatch:
		writeProblem(w, http.StatusUnprocessableEntity, CodeKeyMismatch,
			"This Idempotency-Key was already used with a different request (method, path, or body). Use a new key for a new request.", 0)
	default: // store.InProgress, after the engine's wait
		writeProblem(w, http.StatusConflict, CodeInProgress,
			"A request with this Idempotency-Key is still being processed. Retry after a moment.", m.retryAfter(res.Record.LockedUntil))
	}
}

// detailOf returns a *keyer.KeyError's client-facing detail.
func detailOf(err error) string {
	var ke *keyer.KeyError
	if errors.As(err, &ke) {
		return ke.Detail + "."
	}
	return "The Idempotency-Key header is malformed."
}

func fpVersion(fp string) string {
	v, _, ok := strings.Cut(fp, ":")
	if !ok {
		return ""
	}
	return v
}

// MaxRetryAfter is the most a 409's Retry-After says, in seconds: a short
// hint to come back, never the lease (the first request renews it for as
// long as it runs, and the retry waits for it again).
const MaxRetryAfter = 2

// retryAfter turns a lease's end into whole seconds, from 1 to
// MaxRetryAfter.
func (m *middleware) retryAfter(until time.Time) int {
	d := until.Sub(m.now())
	s := int((d + time.Second - 1) / time.Second)
	return min(max(s, 1), MaxRetryAfter)
}

func (m *middleware) replay(w http.ResponseWriter, r *http.Request, key string, res idem.Result) {
	h := w.Header()
	if res.NotKept {
		writeProblem(w, http.StatusGone, CodeResponseNotKept,
			"The request with this Idempotency-Key was processed, but its response could not be kept (too large), so it cannot be replayed. Do not retry it; look its result up instead.", 0)
		return
	}
	status, body, err := decodeResponse(res.Record.Response, h)
	if err != nil {
		m.logger().ErrorContext(r.Context(), "httpidem: stored response unreadable", "key", m.redact(key), "err", err)
		writeProblem(w, http.StatusInternalServerError, CodeStoredResponse, "The stored response for this Idempotency-Key cannot be read.", 0)
		return
	}
	h[ReplayedHeader] = replayedTrue
	w.WriteHeader(status)
	w.Write(body)
}

// storeFailed answers a request whose claim failed (or was too slow): 503,
// or the handler unprotected with WithFailOpen. A cancelled request gets
// nothing: the client is gone.
func (m *middleware) storeFailed(w http.ResponseWriter, r *http.Request, next http.Handler, key string, err error) {
	if r.Context().Err() != nil {
		return
	}
	if m.failOpen {
		m.logger().WarnContext(r.Context(), "httpidem: store failed; running the handler without idempotency (fail open)", "key", m.redact(key), "err", err)
		next.ServeHTTP(w, r)
		return
	}
	m.logger().ErrorContext(r.Context(), "httpidem: store failed", "key", m.redact(key), "err", err)
	writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable, "The idempotency store is unavailable; the request was not processed. Retry later with the same key.", 1)
}
