package store

import (
	"errors"

	"github.com/idemkit/idemkit/internal/invalid"
)

// Sentinel errors. Compare with errors.Is: backends wrap them with detail.
// Their texts name no package ("record not found"): the package that wraps
// one says where it failed, so a message names each layer once
// ("memory: get \"k\": record not found").
// Failures of the backend itself (a dead connection, a cancelled context)
// wrap the driver's error instead and never match these.
var (
	// ErrNotFound: Get found no live record for the key.
	ErrNotFound = errors.New("record not found")
	// ErrLeaseLost: Complete was called by a token that does not hold the
	// key: the lease lapsed and the key is absent, or another token claimed
	// or completed it.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalid: an argument or an option was rejected before anything was
	// written or connected. It is the same value as keyer.ErrInvalid, so
	// errors.Is(err, store.ErrInvalid) matches the errors of every idemkit
	// package's constructors and options, idemclient's and keyer's included.
	ErrInvalid = invalid.Err
)
