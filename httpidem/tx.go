package httpidem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idemkit/store"
)

// errRollback makes InTx roll back on purpose (a response not kept, a panic).
var errRollback = errors.New("httpidem: rolled back")

// txRun is what happened inside one InTx call.
type txRun struct {
	claim    store.Claim
	outcome  store.Outcome
	claimErr error // the Claim itself failed
	ran      bool  // the handler ran
	buf      *bufferWriter
	status   int
	release  string // why the transaction was rolled back on purpose
	tooLarge bool
	panicked bool
	panicVal any
}

// serveTx is transactional mode: claim, handler and Complete in one
// transaction; the buffered response is sent only after the commit.
func (m *middleware) serveTx(w http.ResponseWriter, r *http.Request, next http.Handler, key, fp string) {
	tok := store.NewToken()
	var deadline time.Time
	if m.wait > 0 {
		deadline = time.Now().Add(m.wait)
	}
	for attempt := 0; ; attempt++ {
		var run txRun
		err := m.tx.InTx(r.Context(), func(ctx context.Context, s store.Store) error {
			return m.inTx(ctx, s, r, next, key, fp, tok, &run)
		})
		if run.panicked {
			m.emit(Event{Kind: Released, Request: r, Key: key, Reason: "panic"})
			panic(run.panicVal)
		}
		if !run.ran {
			if run.claimErr != nil || err != nil {
				if err == nil {
					err = run.claimErr
				}
				m.storeFailed(w, r, next, key, err)
				return
			}
			switch {
			case run.outcome == store.InProgress && m.wait > 0 && m.waitStep(r, key, deadline, attempt):
				continue
			case run.outcome == store.InProgress && r.Context().Err() != nil:
				return
			}
			m.duplicate(w, r, key, run.claim, run.outcome)
			return
		}
		m.afterTx(w, r, key, &run, err)
		return
	}
}

func (m *middleware) inTx(ctx context.Context, s store.Store, r *http.Request, next http.Handler, key, fp string, tok store.Token, run *txRun) error {
	*run = txRun{} // InTx may call fn again after a retryable failure
	c, err := s.Claim(ctx, key, fp, tok, m.lease)
	if err != nil {
		run.claimErr = err
		return err
	}
	run.claim, run.outcome = c, outcome(c, fp)
	if run.outcome != store.Acquired {
		return nil // nothing written: the commit is a no-op
	}
	run.ran = true
	claimed := m.now()
	run.buf = &bufferWriter{}
	func() {
		defer func() {
			if p := recover(); p != nil {
				run.panicked, run.panicVal = true, p
			}
		}()
		next.ServeHTTP(run.buf, r.WithContext(ctx))
	}()
	if run.panicked {
		return errRollback
	}
	run.status = run.buf.finalStatus()
	switch {
	case !m.keep(run.status):
		run.release = "status " + strconv.Itoa(run.status) + " not kept; transaction rolled back"
		return errRollback
	case len(run.buf.body) > m.maxResponse:
		run.tooLarge = true
		run.release = "response larger than " + strconv.Itoa(m.maxResponse) + " bytes; transaction rolled back"
		return errRollback
	}
	if m.now().Sub(claimed) >= m.lease/2 {
		// The lease still applies in a transaction. Nobody can take the key
		// over while this transaction holds it, so it is not renewed while
		// the handler runs (a pgx.Tx is not safe for concurrent use); it is
		// renewed once here, so a slow handler's Complete does not fail.
		c, err := s.Claim(ctx, key, fp, tok, m.lease)
		if err != nil {
			return err
		}
		if c.Outcome != store.Acquired {
			return fmt.Errorf("httpidem: renew the lease before completing: key is %v: %w", c.Outcome, store.ErrLeaseLost)
		}
	}
	resp := encodeResponse(run.status, run.buf.finalHeader(), &m.headers, run.buf.body)
	if err := s.Complete(ctx, key, tok, resp, m.retention); err != nil {
		return err
	}
	return nil
}

// afterTx answers a request whose handler ran inside InTx, which returned
// err.
func (m *middleware) afterTx(w http.ResponseWriter, r *http.Request, key string, run *txRun, err error) {
	switch {
	case err == nil:
		m.emit(Event{Kind: Stored, Request: r, Key: key, Status: run.status})
		run.buf.send(w)
	case errors.Is(err, errRollback) && run.tooLarge:
		m.emit(Event{Kind: Released, Request: r, Key: key, Status: run.status, Reason: run.release})
		m.logger.ErrorContext(r.Context(), "httpidem: response larger than the limit in transactional mode; transaction rolled back",
			"key", key, "status", run.status, "limit", m.maxResponse)
		writeProblem(w, http.StatusInternalServerError, CodeResponseTooLarge,
			"The response was too large to keep, so the request was rolled back. Contact the service owner.", 0)
	case errors.Is(err, errRollback):
		// A response not kept (5xx, 429): nothing committed, so the
		// handler's own answer is the truth.
		m.emit(Event{Kind: Released, Request: r, Key: key, Status: run.status, Reason: run.release})
		run.buf.send(w)
	case r.Context().Err() != nil:
		m.emit(Event{Kind: Released, Request: r, Key: key, Reason: "client disconnected; transaction rolled back"})
	default:
		// Complete or the commit failed. The transaction did not commit,
		// or (when the reply to COMMIT was lost) nobody knows whether it
		// did; either way the handler's response must not reach the client,
		// and a retry with the same key replays or runs it, whichever is true.
		m.emit(Event{Kind: StoreError, Request: r, Key: key, Status: run.status, Err: err})
		m.logger.ErrorContext(r.Context(), "httpidem: transaction failed after the handler ran; not committed, or its outcome is unknown", "key", key, "status", run.status, "err", err)
		writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable,
			"The request may not have been committed. Retry with the same key: a committed request is replayed, one that was not runs again.", 1)
	}
}
