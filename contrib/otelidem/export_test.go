package otelidem

import "time"

// SetNow sets the clock a Telemetry reads (the ages of runs in flight, the
// durations), for tests.
func SetNow(t *Telemetry, now func() time.Time) { t.now = now }

// HeldRuns returns how many runs the in-flight tracker holds, for tests.
func HeldRuns(t *Telemetry) int { return t.flight.len() }
