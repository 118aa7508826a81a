package httpidem

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idemkit/store"
)

// serveLease is lease mode: claim, run the handler while renewing the lease,
// then Complete (a kept response) or Release.
func (m *middleware) serveLease(w http.ResponseWriter, r *http.Request, next http.Handler, key, fp string) {
	tok := store.NewToken()
	var deadline time.Time
	if m.wait > 0 {
		deadline = time.Now().Add(m.wait)
	}
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		c, err := m.store.Claim(r.Context(), key, fp, tok, m.lease)
		if err != nil {
			m.storeFailed(w, r, next, key, err)
			return
		}
		o := outcome(c, fp)
		switch {
		case o == store.Acquired:
			if took := time.Since(sent); took >= m.lease/2 {
				// The lease started somewhere during the claim: it may
				// already have lapsed, or lapse before the renewer or
				// Complete reach the store, and then a retry runs the
				// handler a second time. Do not run it on such a lease.
				m.release(r, key, tok, "claim too slow")
				m.storeFailed(w, r, next, key, fmt.Errorf("httpidem: the claim took %v, half the lease (%v) or more: the key cannot be held safely", took.Round(time.Millisecond), m.lease))
				return
			}
			m.runLease(w, r, next, key, fp, tok, sent)
			return
		case o == store.InProgress && m.wait > 0 && m.waitStep(r, key, deadline, attempt):
			continue
		case o == store.InProgress && r.Context().Err() != nil:
			return // the client left while waiting
		}
		m.duplicate(w, r, key, c, o)
		return
	}
}

// runLease runs the handler on a lease claimed by a Claim sent at claimed.
func (m *middleware) runLease(w http.ResponseWriter, r *http.Request, next http.Handler, key, fp string, tok store.Token, claimed time.Time) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	rn := m.startRenewer(r, key, fp, tok, cancel, claimed)
	tw := &teeWriter{w: w, policy: &m.headers, max: m.maxResponse}

	finished := false
	defer func() {
		if finished {
			return
		}
		// The handler panicked (http.ErrAbortHandler included) or called
		// runtime.Goexit: release the key so the retry runs, then let the
		// panic (or the Goexit) continue.
		p := recover()
		rn.stop()
		m.release(r, key, tok, "panic")
		if p != nil {
			panic(p)
		}
	}()
	next.ServeHTTP(tw, r.WithContext(ctx))
	finished = true
	lost := rn.stop()

	status := tw.finalStatus()
	switch {
	case lost:
		// Complete would fail anyway (fencing); do not release another claim.
		m.logger.ErrorContext(r.Context(), "httpidem: lease lost while the handler ran; response not kept", "key", key, "status", status)
		return
	case r.Context().Err() != nil && (tw.status == 0 || status >= 400):
		m.release(r, key, tok, "client disconnected")
		return
	case !m.keep(status):
		m.release(r, key, tok, "status "+strconv.Itoa(status)+" not kept")
		return
	case tw.overflow:
		m.logger.WarnContext(r.Context(), "httpidem: response larger than the limit; sent but not kept, key released",
			"key", key, "status", status, "limit", m.maxResponse)
		m.release(r, key, tok, "response larger than "+strconv.Itoa(m.maxResponse)+" bytes")
		return
	}
	resp := tw.encoded()
	if err := m.store.Complete(afterCtx(r), key, tok, resp, m.retention); err != nil {
		m.emit(Event{Kind: StoreError, Request: r, Key: key, Status: status, Err: err})
		m.logger.ErrorContext(r.Context(), "httpidem: could not store the response; a retry will run the handler again", "key", key, "status", status, "err", err)
		return
	}
	m.emit(Event{Kind: Stored, Request: r, Key: key, Status: status})
}

// release gives the key up so a retry runs for real.
func (m *middleware) release(r *http.Request, key string, tok store.Token, reason string) {
	if err := m.store.Release(afterCtx(r), key, tok); err != nil {
		// The lease will lapse by itself; until then a retry gets 409.
		m.emit(Event{Kind: StoreError, Request: r, Key: key, Err: err})
		m.logger.ErrorContext(r.Context(), "httpidem: could not release the key; it stays claimed until its lease lapses", "key", key, "reason", reason, "err", err)
		return
	}
	m.emit(Event{Kind: Released, Request: r, Key: key, Reason: reason})
}

// renewer re-claims the key every half lease while the handler runs. It
// runs on a timer, not a goroutine of its own; stop waits for a renewal in
// flight, so nothing outlives the request.
type renewer struct {
	m       *middleware
	r       *http.Request
	key, fp string
	tok     store.Token
	cancel  context.CancelCauseFunc
	renewed time.Time // when the claim or renewal that last extended the lease was sent

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	lost    bool
}

func (m *middleware) startRenewer(r *http.Request, key, fp string, tok store.Token, cancel context.CancelCauseFunc, claimed time.Time) *renewer {
	// The lease runs from when the store applied the claim, at the latest
	// from when the claim was sent: count from there, not from its reply.
	rn := &renewer{m: m, r: r, key: key, fp: fp, tok: tok, cancel: cancel, renewed: claimed}
	rn.mu.Lock()
	rn.t = time.AfterFunc(max(m.lease/2-time.Since(claimed), time.Millisecond), rn.renew)
	rn.mu.Unlock()
	return rn
}

// stop ends renewal and reports whether the lease was lost.
func (rn *renewer) stop() bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.stopped = true
	rn.t.Stop()
	return rn.lost
}

func (rn *renewer) renew() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.stopped || rn.lost {
		return
	}
	m := rn.m
	// Bounded, unlike Complete: stop waits for a renewal in flight, and a
	// renewal that takes half a lease is too late anyway.
	ctx, done := context.WithTimeout(afterCtx(rn.r), m.lease/2)
	sent := time.Now()
	c, err := m.store.Claim(ctx, rn.key, rn.fp, rn.tok, m.lease)
	done()
	switch {
	case err == nil && c.Outcome == store.Acquired:
		rn.renewed = sent
		m.emit(Event{Kind: Renewed, Request: rn.r, Key: rn.key})
		rn.t.Reset(m.lease / 2)
	case err == nil:
		rn.loseLease("the key is now " + c.Outcome.String() + " for another claim")
	case time.Since(rn.renewed) >= m.lease:
		rn.loseLease("renewal kept failing until the lease lapsed: " + err.Error())
	default:
		// A transient failure: the lease still runs; try again sooner.
		m.emit(Event{Kind: StoreError, Request: rn.r, Key: rn.key, Err: err})
		m.logger.WarnContext(rn.r.Context(), "httpidem: lease renewal failed; retrying", "key", rn.key, "err", err)
		rn.t.Reset(max(m.lease/8, time.Millisecond))
	}
}

func (rn *renewer) loseLease(reason string) {
	rn.lost = true
	rn.m.emit(Event{Kind: LeaseLost, Request: rn.r, Key: rn.key, Reason: reason})
	rn.m.logger.ErrorContext(rn.r.Context(), "httpidem: lease lost while the handler runs; cancelling its context", "key", rn.key, "reason", reason)
	rn.cancel(store.ErrLeaseLost)
}
