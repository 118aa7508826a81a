// Package dynamodb is a store.Store on Amazon DynamoDB, through the AWS SDK
// for Go v2. It is a module of its own, so that users of the other backends
// never download the SDK.
//
//	import (
//		"context"
//
//		"github.com/aws/aws-sdk-go-v2/config"
//		"github.com/aws/aws-sdk-go-v2/service/dynamodb"
//		ddbstore "github.com/idemkit/idemkit/store/dynamodb"
//	)
//
//	func openStore(ctx context.Context) (*ddbstore.Store, error) {
//		cfg, err := config.LoadDefaultConfig(ctx)
//		if err != nil {
//			return nil, err
//		}
//		s, err := ddbstore.New(dynamodb.NewFromConfig(cfg), "idempotency_keys")
//		if err != nil {
//			return nil, err
//		}
//		return s, s.Migrate(ctx) // or create the table in your infrastructure code
//	}
//
// or, from a URL (see Scheme):
//
//	s, err := store.Open(ctx, "dynamodb://idempotency_keys?region=eu-west-1")
//
// # The table
//
// One item per key, in a table whose partition key is the string attribute
// "k" (no sort key). Migrate creates it on-demand (PAY_PER_REQUEST) and
// enables Time to Live on TTLAttribute. The other attributes: f
// fingerprint, t token, s status (1 in progress, 2 completed), l end of the
// lease and e end of the record (Unix nanoseconds), r response (binary),
// ttl (Unix seconds, for DynamoDB's TTL), a attempt and n fence
// (Record.Attempt and Record.Fence). Items written before a and n existed
// read with Attempt 0 and Fence 0, and a takeover of one counts attempt 2;
// the table being schemaless, nothing needs migrating.
//
// # What DynamoDB guarantees, and what the Store builds on it
//
// A conditional write (PutItem, UpdateItem, DeleteItem with a
// ConditionExpression) is atomic on its item: the condition is checked and
// the write made as one step, and concurrent writes to one item are
// serialized. A strongly consistent read (ConsistentRead) returns every
// write acknowledged before it. The Store uses nothing else:
//
//   - Claim of a new key is one PutItem conditional on the key having no
//     item (Attempt 1, Fence the Store's clock in microseconds): of
//     concurrent claims exactly one condition passes. A refused write is
//     explained by the item DynamoDB returns with the refusal
//     (ReturnValuesOnConditionCheckFailure=ALL_OLD), or, from a server that
//     returns none (dynalite), by one strongly consistent GetItem. A live
//     record is reported (Mismatch, Completed, InProgress), or, the
//     caller's own lease, extended by an UpdateItem conditional on it
//     still being that live lease (its fence). A record that is over (a
//     lapsed lease, an ended retention) is taken over by a PutItem whose
//     Attempt and Fence store.Successor computes from it, conditional on
//     the item still being exactly that record (token, deadline, status
//     and fence) and over: of concurrent takeovers one passes, and the
//     others explain their refusal again.
//   - Complete is one UpdateItem conditional on the token holding the key in
//     progress; Release one DeleteItem conditional on the token holding a
//     live lease (a lapsed lease is left, for the attempt count); Renew one
//     UpdateItem of the lease's end with that same condition, which never
//     creates an item, so a refusal (store.ErrLeaseLost) writes nothing. A
//     stale holder can therefore never change a record another token took
//     over, whatever the clocks say (fencing by token). Complete and Renew
//     keep the attempt and the fence.
//   - Get is one strongly consistent GetItem.
//
// Throttling (ProvisionedThroughputExceededException, ThrottlingException,
// RequestLimitExceeded) rejects a request without applying it: after the
// SDK's own retries a Store retries it with backoff inside the same call,
// for up to WithThrottleRetry (default 10s), and reports a call still
// throttled then as a backend error, never as store.ErrLeaseLost. Every
// call is safe to repeat after a lost reply: a repeated Claim renews its
// own claim, a repeated Complete finds the record completed by its token and
// returns nil, a repeated Release finds nothing to delete.
//
// # Time: which clock is trusted
//
// DynamoDB has no server time in condition expressions: a condition can
// compare an attribute only with values the request carries. So the
// deadlines an item holds (l, e) are written from the clock of the Store
// that wrote them (time.Now, or WithClock), plus the skew allowance
// (WithClockSkew, default DefaultClockSkew = 1s), and a Store decides that
// a record is over by sending its own clock as the value :now in the
// condition: a record is over from the instant its deadline is at or
// before :now. Records report these deadlines (LockedUntil, ExpiresAt), so
// a lease asked for 30s reports a LockedUntil 31s after the claim, and is
// absent from that instant on for every Store.
//
// What is trusted, precisely: that the clocks of any two processes sharing
// a table disagree by less than the skew allowance. A holder writes its
// deadline on its own clock, the allowance added; another process takes
// over when its own clock reaches that deadline. So a takeover comes
// early only when the taker's clock runs ahead of the holder's by more than
// the allowance (a taker whose clock is ahead, or a holder whose clock is
// behind); then the work may run twice, as after any lapsed lease, while
// the records stay fenced: the stale holder's Complete fails with
// store.ErrLeaseLost and changes nothing. The holder itself (package idem)
// counts its lease as a duration from its claim, not by its clock's
// reading. A taker whose clock runs behind the holder's only takes over
// later, and a retention ends later. Keep the clocks synchronized (on AWS,
// the Amazon Time Sync Service keeps them well within a millisecond) and
// leases much longer than the allowance. Store.CheckClock compares the
// Store's clock with DynamoDB's (the Date header of a response, to the
// second) and reports a clock provably off by more than the allowance;
// store.Open runs it, so a process whose clock is far off fails at start.
// It catches a clock that is seconds or hours wrong, not one a few hundred
// milliseconds off.
//
// DynamoDB's TTL deletes items on AWS's own clock, some time (up to days)
// after their ttl attribute, which is set one hour past the record's end
// (the skew allowance included; for a lease, its end plus store.LapsedKept,
// so that a lapsed lease is kept that long for the attempt count). TTL only removes what every Store already treats
// as absent; it decides nothing. Purge does the same on demand, for tables
// without TTL (and for servers without the TTL API, such as dynalite), with
// a Scan, and keeps a lapsed lease store.LapsedKept as well: prefer TTL on
// a large table.
//
// # Responses stop at 400 KB
//
// A DynamoDB item holds at most 400 KB. Complete refuses a response longer
// than MaxResponseLen (400 KiB less 4 KiB for the other attributes) with an
// error that matches store.ErrInvalid, before anything is written; the
// record stays in progress. The engine (package idem) treats a Complete
// refused with store.ErrInvalid as a result too large to keep: it records
// the key as completed without a response, so a retry is told the work was
// done instead of running it again. The conformance case
// Strings/ResponseSeveralMiB (a 4 MiB response) is, for this reason, the
// one case of package storetest this backend skips, besides the Transactor
// group (see below); TestCompleteTooLarge shows the refusal and what the
// engine makes of it.
//
// # No store.Transactor
//
// DynamoDB transactions (TransactWriteItems) are not interactive: the
// writes of one transaction are sent together in one request, and nothing
// holds a key between a Claim and a later commit. store.Transactor promises
// more than that: a concurrent claim of the key waits until the first
// transaction ends, and a rollback or a crash leaves the key as it was. On
// DynamoDB the Claim would have to be written (and be visible) before the
// caller's writes, and a crash would leave it in progress until its lease
// lapsed. So the Store does not implement store.Transactor; use leases, and
// forward the key to whatever runs the effect.
//
// # Permissions
//
// Claim, Complete, Release, Renew and Get need dynamodb:PutItem, UpdateItem,
// DeleteItem and GetItem on the table (store.Open checks with one GetItem);
// Purge needs Scan and DeleteItem; Migrate needs CreateTable, DescribeTable
// and UpdateTimeToLive, so a service that runs with the item permissions
// alone has its table created by its infrastructure code instead.
//
// # What the local server in the tests cannot show
//
// The tests run against dynalite, a DynamoDB-compatible server on LevelDB
// that follows the DynamoDB API's validation and conditions closely. It
// serializes writes to one item, as DynamoDB does, so the atomicity
// tests are real; but it cannot show DynamoDB's latency, its throttling
// (throttling is tested with a client that injects the errors), its
// partitions, TTL deletion, or global tables: with asynchronous
// replication, concurrent writes in two regions both succeed and the last
// writer wins, so a condition holds only within one region; keep the keys
// in one region's table (a global table with multi-region strong
// consistency is untested here). dynalite does not return the item with a
// refused condition, so the GetItem fallback runs there; the tests run the
// suite a second time with a client wrapper that hands the item back as
// DynamoDB does (TestConformanceReturnedItem). It has no TTL or
// transaction API.
package dynamodb
