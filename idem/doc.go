// Package idem runs an operation once per idempotency key, however many
// times it is retried: claim the key, run the work, settle the key.
//
//	e, err := idem.New(st)
//	res, err := e.Run(ctx, key, fingerprint, func(ctx context.Context) idem.Verdict {
//		resp, err := charge(ctx, key)
//		if err != nil {
//			return idem.Discard(err.Error()) // no charge happened: a retry runs again
//		}
//		return idem.Keep(resp)
//	})
//
// It is the one engine under every surface of idemkit: the HTTP middleware
// (package httpidem), message de-duplication (package dedup) and Do, for
// any function with a typed result. Package idem imports only package store;
// its name is short so that callers write idem.Do and idem.New, and the
// module root stays empty.
//
// # The promise
//
// The work runs at most once per key while the store keeps its promises, and
// a retry never runs it again once it may have taken effect. The key is
// released (so a retry runs the work) only when the work says its effect did
// not happen: Discard, or a panic. Everything else, an unknown included, is
// recorded as done: a caller that went away, an empty response, a response
// too large to keep (recorded without it: KeepWithoutResponse), an unknown
// commit outcome in transactional mode (left to the transaction's fate).
//
// # The contract
//
// Lease mode (the default), for each outcome of the work and each fault;
// every row is a test of the package named in the last column:
//
//	situation                                   what Run does                                                  test
//	key absent                                  claims, runs the work once                                     TestRunKeepCompletes
//	work returns Keep(resp)                     Complete(resp); a retry replays resp                           TestRunKeepCompletes
//	work returns Discard                        Release; a retry runs the work again                           TestRunDiscardReleases
//	work panics                                 Release, then the panic goes on                                TestRunPanicReleases
//	work returns KeepWithoutResponse            Complete without the response; a retry gets Result.NotKept     TestRunNotKeptCompletesWithoutResponse
//	store refuses the response (ErrInvalid)     as KeepWithoutResponse                                         TestRunResponseRefusedCompletesWithoutResponse
//	caller's ctx cancelled while work runs      work's ctx cancelled; renewal goes on; result recorded          TestRunCallerCancelKeepsRenewing
//	work runs longer than the lease             lease renewed (Store.Renew) every lease/2                      TestRunHeartbeatRenews
//	another claim takes the key during work     work's ctx cancelled, cause store.ErrLeaseLost; nothing written TestRunLeaseLostToAnotherClaim
//	renewal finds the lease lapsed (key absent)  work's ctx cancelled, cause store.ErrLeaseLost; renewal stops  TestRunRenewFindsLeaseLapsed
//	renewal finds our own Complete recorded     renewal stops quietly                                          TestRunRenewFindsOwnCompletion
//	renewals fail until the lease runs out      work's ctx cancelled, cause store.ErrLeaseLost                 TestRunRenewalsFailUntilLeaseEnds
//	a renewal reaches the store after Release   nothing changes: the key stays free, a retry runs              TestLateRenewalCannotReviveReleasedKey
//	an earlier holder's lease lapsed mid-work   the taker's AttemptFrom: Number 2, Takeover, a larger Fence;   TestTakeoverEndToEnd
//	                                            the earlier holder's result is refused (store.ErrLeaseLost)
//	caller's ctx has a deadline                 with WithLeaseFromDeadline: lease min(lease, left + margin)    TestLeaseFromDeadline
//	Complete fails (a store blip)               retried with backoff, renewing, until it succeeds              TestRunCompleteRetriedThroughBlip
//	store restarted between work and Complete   retried until the store is back; no second run                 TestRunCompleteSurvivesStoreRestart
//	store paused between work and Complete      retried until the store answers; no second run                 TestRunCompleteSurvivesStorePause
//	Complete fails until the lease ends         ErrNotRecorded; the key lapses with its lease                  TestRunCompleteGivesUpWhenLeaseEnds
//	Complete fails for 4 leases, renewals work  recorded done without the response (as KeepWithoutResponse)   TestRunCompleteKeepsFailingWhileRenewing
//	Complete fails, renewals succeed            ErrNotRecorded after four leases (the caller is not held forever) TestRunCompleteBoundedWhileRenewing
//	Complete finds the key held by another      store.ErrLeaseLost; the other's record untouched               TestRunCompleteFencedByAnotherClaim
//	claim's reply after half the lease          Release; ErrSlowClaim (matches ErrUnavailable); work not run   TestRunSlowClaimNotActedOn
//	claim fails                                 ErrUnavailable; work not run                                   TestRunClaimFails
//	key completed                               Result{Outcome: Completed}: replay Record.Response             TestRunKeepCompletes
//	key in progress, WithWait(0)                Result{Outcome: InProgress}, at once                           TestRunInProgress
//	key in progress (default: wait 10 s)        polls with bounded backoff; replays when the other finishes    TestRunWaitReplays
//	  ... and the caller's ctx ends             returns at once with ctx's error                               TestRunWaitEndsWithContext
//	key used with another fingerprint           Result{Outcome: Mismatch}                                      TestRunMismatch
//	N concurrent calls, one key                 the work runs once; the others see InProgress or Completed     TestRunConcurrentOnce
//
// Transactional mode (Run with InTx, on a store.Transactor): claim, work and
// Complete run in one transaction; the work writes through the transaction
// in its context.
//
//	situation                                   what Run does                                                  test
//	work returns Keep(resp)                     Complete(resp) in the transaction; commit                      TestTxKeepCommits
//	work returns Discard                        roll back: key and effect gone; a retry runs                   TestTxDiscardRollsBack
//	work returns KeepWithoutResponse            roll back (no effect committed without its answer)             TestTxNotKeptRollsBack
//	work panics                                 roll back, then the panic goes on                              TestTxPanicRollsBack
//	work ran past half the lease                lease renewed once (the transaction's Store.Renew) before Complete TestTxRenewsBeforeComplete
//	Complete finds the lease lapsed             claim again with the same token (nobody can hold the row), retry TestTxCompleteAfterLapseReclaims
//	the work asks which attempt it is           AttemptFrom(ctx), as in lease mode                             TestAttemptFromTx
//	commit (or Complete) fails                  SettleUnknown, ErrNotRecorded: a retry replays or runs         TestTxCommitFails
//	concurrent duplicate                        blocks on the key's row, then replays                          TestTxConcurrentOnce
//	caller leaves after the work returned       commit goes on (detached context, bounded by the lease)       TestTxCallerLeavesAfterWorkCommits
//
// Construction: New fails (store.ErrInvalid) for a nil store, a nil option
// or an invalid option value: TestNewRejects; Run fails the same way for
// InTx on a store that is not a store.Transactor. Transactional mode is
// chosen per call (InTx, or InTxIfSupported: transactions where the store
// has them), never by a type assertion on the store, so one Engine serves
// both modes.
//
// # Leases and the heartbeat
//
// In lease mode the claim holds the key for WithLease (or less: see
// WithLeaseFromDeadline; everything below is in terms of the run's lease). A
// heartbeat renews it with Store.Renew every lease/2, and after a failed
// renewal on the engine's one backoff (5 ms doubling to lease/8), from the
// claim until the key is settled: while the work runs and while its result
// is being recorded. It uses a context that ignores the caller's
// cancellation, so a caller that gives up cancels the work's context but
// never the renewal while the work still runs.
//
// Store.Renew extends only a live lease the run holds and never writes
// anything else, so a renewal that reaches the store late, after the key
// was released (a discarded verdict), leaves the key free for the retry the
// release was for. When it refuses (store.ErrLeaseLost) one Get says why:
// the key completed by the run's own token means a Complete went through,
// and renewal stops quietly; the key held or completed by another claim,
// or absent (the lease lapsed), means the lease is over: the work's context
// is cancelled with store.ErrLeaseLost as its cause (context.Cause), a
// LeaseLost event says which, and renewal stops (once the work has
// returned, recording its result may still claim an absent key back with
// the run's token, as below, and renewal then resumes). Any other failure is
// retried; when renewals fail until the lease has run out, the work's
// context is cancelled the same way, and renewal goes on so that the
// result can still be recorded if nobody took the key.
//
// The heartbeat starts lazily: the claim queues the key on the engine's one
// timer, and the renewal loop's goroutine starts only when the first renewal
// is due, so a work settled within half the lease runs without a goroutine,
// channel or timer of its own.
//
// The result is recorded with Complete, retried with backoff (5 ms doubling
// to 500 ms or lease/8) for as long as the lease holds; each attempt is
// bounded by lease/4 so a hung store cannot hold the loop. When Complete
// reports store.ErrLeaseLost the engine claims the key again with its own
// token: Acquired means nobody took it (the lease had lapsed) and the
// Complete is retried; anything else means another claim owns the key, and
// the engine stops without touching it. Only a key lost to another claim, or
// a lease that ended without a successful renewal, stops the retries, with
// one bound: when renewals succeed but Complete keeps failing for four
// leases (a store that renews but refuses the write), Run returns
// ErrNotRecorded rather than block its caller forever.
//
// A claim whose reply came after half the lease is not acted on: its lease
// started somewhere during the call and may lapse before the first renewal.
// The key is released and Run returns ErrSlowClaim. Transactional mode is
// exempt: a claim there may wait on the key's row for a concurrent
// transaction, which keeps everyone else out, and the lease is renewed once
// before Complete when the work ran past half of it.
//
// # Attempts and takeovers
//
// The work's context carries the Attempt of the claim that acquired its
// key (AttemptFrom), in lease and transactional mode and under every
// surface (an httpidem handler reads it from its request's context, a
// dedup fn and a Do fn from theirs); the Acquired event carries it too.
// Number is the store's count of claims that acquired the key
// (store.Record.Attempt): above 1 means a takeover (Takeover), an earlier
// holder lost its lease before it completed and may already have acted, so
// the work should look its effect up before acting again. Fence grows with
// every claim of the key; the work passes it to its own writes so that a
// downstream system refuses a stale holder. A store that counts no attempts
// (a record written before stores did) gives Number 0 and no takeover.
//
// # Leases from the caller's deadline
//
// WithLeaseFromDeadline(margin) makes a run whose caller's context has a
// deadline hold its key for at most the time left plus margin (never less
// than MinDeadlineLease, nor more than WithLease), so a process that dies
// mid-work keeps a short request's key only that long. The renewal
// interval, the slow-claim rule, the attempt timeouts and the bounds of
// recording the result all follow the run's lease.
//
// # Do
//
// Do runs any function once per key with a typed result, kept with a Codec
// (JSON by default): Do(ctx, e, key, fn, WithScope(tenant),
// WithFingerprint(fp)). Lease and wait come from the Engine (WithLease,
// WithWait); the rules are the engine's: an error from fn releases the key,
// a result too large to keep is recorded without it (later calls get
// ErrNotKept), a duplicate gets the kept result, ErrInProgress or
// ErrMismatch. The first call returns what a replay will: the result
// encoded and decoded again by the codec, so Do[any] gives float64 both
// times, and a result the codec cannot keep fails at once (ErrNotKept).
// Tests: TestDoRunsOnce, TestDoErrorReleases, TestDoScopeSeparates,
// TestDoTooLargeNotKept, TestDoInProgressAndRejects, TestDoFirstCallAsReplay.
//
// # Tracing
//
// WithTracer adds a Tracer, in the shape of pgx's QueryTracer: its
// TraceRunStart is called before the claim and returns the context the run
// goes on in, and TraceRunEnd gets that context with the Result, so a span
// started at the start is the parent of every span the work starts. A
// Tracer that is also an EventTracer receives an Event for every claim
// outcome (Acquired, Replayed, InProgress, Mismatch, Waiting, SlowClaim),
// every settle outcome (Completed, Released, LeaseLost, Unknown), every
// renewal, every failed store call (StoreError), and the duration of every
// store call by operation (StoreCall with Op and Took). httpidem, dedup,
// grpcidem and Do all run through the engine, so one tracer sees HTTP
// requests, messages and calls alike (otelidem is one).
//
// # Keys out of logs
//
// Keys are client-chosen and scoped (tenant, user), so the engine writes
// them into its log lines, and into the text of the errors it returns or
// logs, only redacted: by default as keyer.DefaultRedactor() writes them,
// "hmac:" and 32 hex digits of an HMAC with a secret drawn once per process.
// A store's error that quotes the key (the Redis and memory backends' do) is
// redacted too, and still matches errors.Is. WithKeyRedactor chooses
// another redactor (keyer.HashKeys with a shared secret, keyer.OmitKeys,
// keyer.RawKeys only by explicit choice). Tracers get the raw key
// (RunStart.Key, Event.Key: a tracer is your own code; otelidem hashes it);
// errors they get are redacted like every other error.
package idem
