package httpidem

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/idemkit/idemkit/idem"
)

// errResponseTooLarge cancels a transactional handler whose response went
// past WithMaxResponse.
var errResponseTooLarge = errors.New("httpidem: response larger than WithMaxResponse; the transaction will roll back")

// serveTx is transactional mode: claim, handler and Complete in one
// transaction (the engine's); the response is buffered, at most
// WithMaxResponse bytes, and sent only after the commit.
func (m *middleware) serveTx(ctx context.Context, w http.ResponseWriter, r *http.Request, next http.Handler, key, fp string) {
	var buf *bufferWriter
	body, _ := r.Body.(io.Seeker) // the fingerprinter's copy of the body
	res, err := m.e.Run(ctx, key, fp, func(wctx context.Context) idem.Verdict {
		hctx, cancel := context.WithCancelCause(wctx)
		defer cancel(nil)
		if body != nil {
			// The store may run the transaction again after the database
			// rolled it back whole (a deadlock): this attempt reads the
			// body from the start, as the first one did.
			_, _ = body.Seek(0, io.SeekStart) // to 0, which cannot fail
		}
		buf = &bufferWriter{inner: w, max: m.maxResponse, cancel: cancel}
		next.ServeHTTP(buf, r.WithContext(hctx))
		size := len(buf.body)
		if buf.overflow {
			size = m.maxResponse + 1
		}
		return m.verdict(buf.finalStatus(), size, false, func() []byte {
			return encodeResponse(buf.finalStatus(), buf.finalHeader(), &m.headers, buf.body)
		})
	}, m.run...)
	m.answer(w, r, next, key, res, err, func(res idem.Result, err error) {
		switch {
		case err == nil && res.Settle == idem.SettleCompleted:
			buf.send(w)
		case err == nil && buf.overflow:
			m.logger().ErrorContext(r.Context(), "httpidem: response larger than the limit in transactional mode; handler cancelled, transaction rolled back",
				"key", m.redact(key), "limit", m.maxResponse)
			writeProblem(w, http.StatusInternalServerError, CodeResponseTooLarge,
				"The response was too large to keep, so the request was rolled back. Contact the service owner.", 0)
		case err == nil:
			// A response not kept (5xx, 429): nothing committed, so the
			// handler's own answer is the truth.
			buf.send(w)
		case r.Context().Err() != nil:
			// The client is gone; whatever happened, it hears nothing.
		default:
			// Complete or the commit failed. The transaction did not commit,
			// or (when the reply to COMMIT was lost) nobody knows whether it
			// did; either way the handler's response must not reach the
			// client, and a retry with the same key replays or runs it,
			// whichever is true.
			writeProblem(w, http.StatusServiceUnavailable, CodeStoreUnavailable,
				"The request may not have been committed. Retry with the same key: a committed request is replayed, one that was not runs again.", 1)
		}
	})
}
