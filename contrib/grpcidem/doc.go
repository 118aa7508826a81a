// Package grpcidem makes unary gRPC calls safe to retry: a server
// interceptor runs each call once per idempotency key (on idemkit's engine,
// package idem) and replays the stored response to every retry, and a
// client interceptor sends one key per logical call and keeps it across its
// own retries.
//
//	e, err := idem.New(st, idem.WithWait(5*time.Second))
//	if err != nil {
//		return err
//	}
//	si, err := grpcidem.UnaryServerInterceptor(e, grpcidem.WithScope(callerOf)) // callerOf(ctx): who is calling
//	if err != nil {
//		return err
//	}
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor( /* your authentication first, */ si))
//
// and on the client's connection:
//
//	ci, err := grpcidem.UnaryClientInterceptor()
//	if err != nil {
//		return err
//	}
//	conn, err := grpc.NewClient(addr, grpc.WithUnaryInterceptor(ci),
//		grpc.WithTransportCredentials(insecure.NewCredentials()))
//	if err != nil {
//		return err
//	}
//	var replayed bool
//	err = conn.Invoke(ctx, "/payments.Payments/Pay", req, resp, grpcidem.Replayed(&replayed))
//
// # The server side
//
// The key is the one value of the request metadata "idempotency-key" (the
// same syntax as the HTTP header: a bare token or a quoted string, at most
// 255 visible ASCII characters). The request is identified by the full
// method name and the deterministic protobuf encoding of the request
// message, so the same key with another method or another request message is
// refused. Keys are scoped by WithScope (the caller's identity, from your
// authentication: put this interceptor after it). Answers:
//
//	situation                                   answer
//	method's policy is Skip                     handler runs, untouched
//	no key, policy Optional                     handler runs unprotected
//	no key, policy Required (the default)       InvalidArgument
//	malformed key, several keys                 InvalidArgument
//	first call                                  the handler's response or error
//	retry after a kept result                   the same response (or error status, details included),
//	                                            header "idempotent-replayed: true"
//	same key, other method or request           FailedPrecondition (the key names another operation: the
//	                                            system's state, not the argument, is what is wrong)
//	same key while the first is running         Aborted with a RetryInfo detail (WithRetryDelay, 1s, at
//	                                            most the lease's remaining time); or, with
//	                                            idem.WithWait, wait and replay
//	store unavailable (work not run)            Unavailable with a RetryInfo detail
//	transactional mode, commit outcome unknown  Unavailable: retry with the same key
//	replay of a result too large to keep        AlreadyExists: done, but its response was not kept
//	(over WithMaxResponse, 1 MiB)               (transactional mode: rolled back, Internal)
//	scope function failed                       Internal (Unauthenticated if it wraps ErrUnauthenticated)
//
// A handler's error status is kept and replayed like a response unless
// WithKeep says otherwise: by default the codes that say "nothing happened,
// try again" (Unavailable, ResourceExhausted, Aborted, DeadlineExceeded,
// Canceled, Internal, Unknown, Unimplemented, DataLoss) release the key, so
// the retry runs the handler again; the rest (OK, InvalidArgument,
// NotFound, FailedPrecondition, ...) are final and kept. A panic releases the
// key and goes on. Header and trailer metadata set by the handler are sent
// on the first call only; a replay carries the message (or status) alone.
//
// The response message type is found from the method's descriptor in
// protoregistry.GlobalFiles (generated code registers it); for services not
// registered there, give it with WithResponseType.
//
// # Why no streaming interceptor
//
// A stream is not one request and one answer: its fingerprint would need the
// whole client stream before the handler may start, and a replay would need
// every message the server sent, in order, with the timing between them
// lost. Calls that must be idempotent are unary in practice (create a
// payment, send a message); a streaming method that needs it can call the
// engine (idem.Engine.Run) itself for each message it acts on, which is what
// idemkit's dedup package does for queues.
//
// # The client side
//
// UnaryClientInterceptor adds "idempotency-key" to each call's metadata: the
// key of WithKey(ctx, key), or a fresh one per call, unless the call's
// metadata has one already. It retries the call with the same key (bounded
// attempts, backoff with jitter) on Unavailable (a lost connection, a lost
// reply, an unavailable store) and on Aborted or ResourceExhausted carrying
// a RetryInfo detail (the key in flight), waiting what RetryInfo says.
// Calls without a key are never retried. Replayed(&b) is a call option that
// reports whether the answer was a replay.
package grpcidem
