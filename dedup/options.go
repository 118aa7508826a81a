package dedup

// Option configures a Deduper. A nil Option, or one given an invalid value,
// makes New fail with an error matching store.ErrInvalid. The engine's
// settings (lease, wait, retention, logger, key redactor, tracer) are set
// on the *idem.Engine given to New.
type Option func(*options) error

type options struct {
	scope string
}

// WithScope puts every id in a namespace (the message source: "stripe",
// "orders-queue"), so one store serves several consumers whose ids may
// collide. The store key is keyer.ScopedKey(id, "dedup", scope).
func WithScope(scope string) Option {
	return func(o *options) error {
		o.scope = scope
		return nil
	}
}
