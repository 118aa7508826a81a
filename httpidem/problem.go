package httpidem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ProblemContentType is the media type of every error the middleware writes
// (RFC 9457 problem details).
const ProblemContentType = "application/problem+json"

// Problem codes: the "code" member of the problem details the middleware
// writes, stable for clients to switch on.
const (
	CodeKeyMissing       = "idempotency-key-missing"       // 400
	CodeKeyMalformed     = "idempotency-key-malformed"     // 400
	CodeBodyUnreadable   = "request-body-unreadable"       // 400
	CodeKeyMismatch      = "idempotency-key-mismatch"      // 422
	CodeInProgress       = "idempotency-key-in-progress"   // 409
	CodeBodyTooLarge     = "request-body-too-large"        // 413
	CodeScope            = "idempotency-scope-invalid"     // 500
	CodeStoredResponse   = "stored-response-unreadable"    // 500
	CodeResponseTooLarge = "response-too-large-to-keep"    // 500 (transactional mode)
	CodeResponseNotKept  = "idempotency-response-not-kept" // 410: done, its response was too large to keep (lease mode)
	CodeStoreUnavailable = "idempotency-store-unavailable" // 503
)

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// writeProblem writes an RFC 9457 problem with type about:blank, the status's
// reason phrase as title, and a stable code extension member.
func writeProblem(w http.ResponseWriter, status int, code, detail string, retryAfter int) {
	body, err := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Code: code})
	if err != nil { // cannot happen: only strings and an int
		body = []byte(`{"type":"about:blank","status":` + strconv.Itoa(status) + `}`)
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	h.Set("Cache-Control", "no-store")
	h.Del("Idempotent-Replayed")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
