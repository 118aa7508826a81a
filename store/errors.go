package store

import "errors"

// Sentinel errors. Compare with errors.Is: backends wrap them with detail.
// Failures of the backend itself (a dead connection, a cancelled context)
// wrap the driver's error instead and never match these.
var (
	// ErrNotFound: Get found no live record for the key.
	ErrNotFound = errors.New("store: record not found")
	// ErrLeaseLost: Complete was called by a token that does not hold the
	// key: the lease lapsed and the key is absent, or another token claimed
	// or completed it.
	ErrLeaseLost = errors.New("store: lease lost")
	// ErrInvalid: an argument was rejected before anything was written.
	ErrInvalid = errors.New("store: invalid argument")
)
