package dedup

import "strconv"

// Outcome says what Process did with a delivery, and so what to tell the
// broker or the webhook sender. Outcomes are values, not errors: a duplicate
// is a normal event in an at-least-once system.
//
//	Outcome     error   what happened                                       Action      what to do with the message
//	Processed   nil     fn ran now and succeeded; the id is recorded        Ack         ack (webhook: 2xx)
//	Duplicate   nil     the id was processed before; fn did not run         Ack         ack (webhook: 2xx)
//	InFlight    nil     another delivery holds the id, after the wait       Retry       nack / redeliver later (webhook: 409)
//	Failed      non-nil fn, the store or the lease failed               Retry       nack / redeliver later (webhook: 5xx)
//	Mismatch    nil     the id was used with another payload (ProcessWith)  DeadLetter  do not apply; dead-letter it (webhook: 422)
//
// Process returns a non-nil error exactly when the outcome is Failed.
type Outcome uint8

const (
	// Processed: fn ran in this call, returned nil, and its completion was
	// recorded. Ack the message.
	Processed Outcome = iota + 1
	// Duplicate: the id was already processed (within the retention); fn was
	// not called. Ack the message: its effect has happened once already.
	Duplicate
	// InFlight: another delivery of the same id holds a live lease and is
	// running fn right now; fn was not called. Do not ack: let the broker
	// redeliver later (nack, or leave it to the visibility timeout). By then
	// the other delivery has either finished (the redelivery is a Duplicate)
	// or failed and released the id (the redelivery runs fn). For a
	// Retry-After hint, the store's Get(ctx, d.Key(id)) returns the record,
	// whose LockedUntil is when the other delivery's lease lapses unless it
	// is renewed.
	InFlight
	// Failed: the message was not processed to completion and the id is not
	// recorded as done; the error says why (fn's own error, a failure of the
	// store, or a lost lease). Do not ack: the redelivery runs fn again.
	Failed
	// Mismatch: ProcessWith found id processed or in flight with another
	// payload fingerprint: a different message reuses the id. fn was not
	// called. Redelivering will not help: dead-letter the message, or alert.
	Mismatch
)

// Action says what to tell the broker or the webhook sender about a
// delivery, so that no outcome can loop: Processed and Duplicate are Ack;
// InFlight and Failed are Retry (the next delivery replays or runs);
// Mismatch is DeadLetter (the id was reused with another payload: no
// redelivery will ever apply it).
func (o Outcome) Action() Action {
	switch o {
	case Processed, Duplicate:
		return Ack
	case Mismatch:
		return DeadLetter
	}
	return Retry
}

// Action is what to do with a delivered message, given its Outcome.
type Action uint8

const (
	// Ack: the message is done; ack it (webhook: 2xx).
	Ack Action = iota + 1
	// Retry: let the broker redeliver it later: nack, or leave it to the
	// visibility timeout (webhook: 409 for InFlight, 5xx for Failed).
	Retry
	// DeadLetter: the message will never be applied as it is; move it to
	// the dead-letter queue, or log and ack it (webhook: 422).
	DeadLetter
)

// String returns the action's name in lower case.
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case DeadLetter:
		return "dead-letter"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// String returns "processed", "duplicate", "in flight", "failed", or
// "Outcome(N)" for an unknown value.
func (o Outcome) String() string {
	switch o {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	case InFlight:
		return "in flight"
	case Failed:
		return "failed"
	case Mismatch:
		return "mismatch"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}
