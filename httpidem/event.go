package httpidem

import (
	"net/http"
	"strconv"
)

// EventKind says what happened to a request.
type EventKind uint8

// The events reported to WithHook.
const (
	// Replayed: a kept response was replayed (Status is its status).
	Replayed EventKind = iota + 1
	// Conflict: the key was in progress; the client got 409.
	Conflict
	// Mismatch: the key was used with another request; the client got 422.
	Mismatch
	// Stored: the handler's response was kept (Status is its status).
	Stored
	// Released: the key was released so a retry runs again; Reason says
	// why (a status not kept, a panic, a client disconnect, a response too
	// large, a rolled-back transaction).
	Released
	// StoreError: a store call failed (Err). On the first Claim the client
	// got 503 (or the handler ran unprotected with WithFailOpen).
	StoreError
	// Renewed: the lease was renewed while the handler ran.
	Renewed
	// Waiting: the key was in progress and the request starts waiting for
	// it (WithWait); it ends in Replayed, a run of its own, or Conflict.
	Waiting
	// LeaseLost: renewal found the key taken by another claim, or the lease
	// could not be renewed before it lapsed; the handler's context is
	// cancelled with store.ErrLeaseLost as its cause and the response will
	// not be kept.
	LeaseLost
	// StoredWithoutResponse: the handler ran and its key was recorded as
	// done without the response (larger than WithMaxResponse, or a 101);
	// retries get 410 with CodeResponseNotKept.
	StoredWithoutResponse
)

// String returns the kind's name in lower case.
func (k EventKind) String() string {
	switch k {
	case Replayed:
		return "replayed"
	case Conflict:
		return "conflict"
	case Mismatch:
		return "mismatch"
	case Stored:
		return "stored"
	case StoredWithoutResponse:
		return "stored without response"
	case Released:
		return "released"
	case StoreError:
		return "store error"
	case Renewed:
		return "renewed"
	case LeaseLost:
		return "lease lost"
	case Waiting:
		return "waiting"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one observable thing the middleware did with a request.
type Event struct {
	Kind    EventKind
	Request *http.Request
	// Key is the store key (scoped), raw: the hook is the user's own code,
	// which must redact it before it reaches logs or telemetry (see
	// WithKeyRedactor and keyer.Redactor).
	Key string
	// Status is the response status, when there is one.
	Status int
	// Reason explains Released and LeaseLost events.
	Reason string
	// Err is the store's error for StoreError (and LeaseLost when renewal
	// failed with an error).
	Err error
}
