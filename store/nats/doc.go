// Package nats keeps idempotency keys in a NATS JetStream key-value bucket,
// so every instance of a service sees the same claims and stored responses,
// and, on a bucket of three replicas, an acknowledged claim or completion
// survives the loss of any one server.
//
// It is a module of its own (github.com/idemkit/idemkit/store/nats), on
// nats.go and its jetstream package, so the core module never downloads
// them.
//
//	import (
//		"context"
//
//		"github.com/nats-io/nats.go"
//		idemnats "github.com/idemkit/idemkit/store/nats"
//	)
//
//	func openStore(ctx context.Context) (*idemnats.Store, error) {
//		nc, err := nats.Connect("nats://127.0.0.1:4222")
//		if err != nil {
//			return nil, err
//		}
//		s, err := idemnats.New(nc, "idempotency", idemnats.WithReplicas(3))
//		if err != nil {
//			return nil, err
//		}
//		return s, s.Migrate(ctx) // creates the bucket if it does not exist
//	}
//
// or, with the URL registered for store.Open:
//
//	s, err := store.Open(ctx, "nats://host1:4222,host2:4222,host3:4222/idempotency?replicas=3")
//
// # How each call maps to JetStream
//
// Each key is one entry of the bucket, named by the key's bytes in base64url
// (so any key of up to store.MaxKeyLen bytes is a valid NATS key). Every
// write is a publish with Nats-Expected-Last-Subject-Sequence, JetStream's
// compare-and-set on the entry's revision, so the stream's leader decides
// every race and only one writer wins:
//
//   - Claim of a new key is one publish expecting no entry (the KV's Create):
//     it succeeds for exactly one of any number of concurrent claims. A
//     claim that finds the key taken reads the entry and decides: Mismatch,
//     Completed (replay), InProgress, or, for its own token, a renewal; a
//     lapsed lease, an expired record or a released key (a delete marker)
//     is taken over by a publish expecting the revision it read. A lost race
//     reads again.
//   - Complete reads the entry and, if token holds it, writes the completed
//     record expecting that revision: a holder whose lease lapsed and was
//     taken over gets store.ErrLeaseLost and changes nothing. A retried
//     Complete by the token that completed the key returns nil and keeps the
//     first response.
//   - Release writes a delete marker expecting the revision in which token
//     holds a live lease on the key; anything else (a lapsed lease too) is
//     left alone.
//   - Renew reads the entry and, if token holds a live lease, writes the
//     same record with the new lease expecting that revision; anything
//     else (no record, a delete marker, a lapsed lease, a completed record,
//     another token's lease) is store.ErrLeaseLost without a write, and a
//     write that finds the revision changed reads again, so a renewal
//     never brings back a key that a Release, a Complete or a takeover
//     wrote first.
//
// # Attempts and fences
//
// A record carries its Attempt and Fence (record version 2). A Claim that
// acquires the key computes them with store.Successor from the record it
// read, at the servers' time bound at which it read it, and writes them in
// the same compare-and-set publish that takes the key, so a record that
// changed in between fails the write and the claim reads again. A claim of
// a new key (no entry, or a delete marker) counts from 1 with the bound in
// microseconds as its fence. Complete and Renew write the attempt and
// fence they read. Records written before version 2 read with Attempt 0
// and Fence 0; a takeover of one counts attempt 2.
//
// A lapsed lease nobody has taken over stays in the bucket for
// store.LapsedKept after its deadline (its Nats-TTL is the lease plus
// LapsedKept, and Purge leaves it until then), absent to Claim and Get, so
// that the claim that takes it over counts one attempt more and an
// Inspector lists it as lapsed.
//   - Reads go to the stream's leader (a JetStream STREAM.MSG.GET request) on
//     a replicated bucket, since the KV's direct gets may be answered by a
//     replica that lags; on a one-replica bucket they are direct gets.
//
// # Time
//
// A record's deadline is the time stamp the stream's leader gave the
// entry's message plus the lease (in progress) or the retention
// (completed), kept in the entry's Idemkit-Life header: every client derives
// the same deadline, whatever its own clock says. Deciding that a deadline
// has passed needs the servers' time now; the Store keeps a lower bound of
// it from the time stamps of the messages it reads (each was in the past
// when its reply arrived), refreshed when older than a second by writing a
// small entry (idemkit.clock, which no key can name) and reading its stamp,
// and advanced in between by this process's monotonic clock. So what is
// trusted is: the servers' clocks agree with each other (JetStream's own
// TTLs assume it too), and this process's monotonic clock runs at the right
// rate over a second. The wall clock of the client is not used. The bound
// lags the servers by about one round trip, so a lapsed lease is taken over
// a round trip late at worst, never early. The LockedUntil that an
// Acquired Claim reports is the bound before its write plus the lease, at
// or a round trip before the deadline other readers see.
//
// # Retention and server versions
//
// On NATS 2.11 and later, Migrate creates the bucket with per-message TTLs
// (LimitMarkerTTL), and every record carries a Nats-TTL of its retention,
// or of its lease plus store.LapsedKept, rounded up to a second, plus a
// second: the servers delete each record once it is over, and Purge has
// little to do. Before 2.11 (Debian
// 12's nats-server is 2.9) there are no per-key TTLs: records stay until
// Purge (store.Purger; run it periodically, as package purge does) deletes
// the expired ones (a lapsed lease once LapsedKept is behind it), by purging
// the key's messages up to that revision only,
// so a newer write is never touched. A bucket created by an older server, or
// by hand without per-message TTLs, is used the same way, with Purge.
//
// A bucket of more than one replica needs NATS 2.9.21 or later: before it, a
// replicated stream checked Nats-Expected-Last-Subject-Sequence only
// against what it had stored, not against writes still being replicated,
// so two concurrent takeovers of one key could both win (nats-server issue
// 4320; on a 2.9.10 cluster storetest's concurrent takeover cases fail).
// The Store refuses such a bucket (store.ErrInvalid, from Migrate and from
// every call) rather than risk a second run. One replica is safe on any
// version: one server checks and writes.
//
// # Limits
//
// A response is kept in the entry with the record, so it must fit in one
// message: its limit is the smaller of the bucket's max value size
// (WithMaxValueSize, max_value_size=) and the servers' max_payload (1 MiB by
// default, up to 64 MiB in the server's configuration), less what the
// record and a read add (reads from a leader come base64-encoded in JSON,
// four bytes for three). MaxResponse tells the limit. Complete refuses a
// larger response with store.ErrInvalid before writing anything; the engine
// then keeps the key completed without a response. Raise max_payload (8 MiB
// keeps responses of several MiB) if you need more.
//
// # Failover
//
// On a three-replica bucket every write is acknowledged once a majority of
// the stream's Raft group has it. TestFailover kills the stream's leader
// (-9) under load, kills it while a follower is stopped and lagging, and
// kills and restarts the whole cluster, and counts no acknowledged claim
// lost, no acknowledged completion lost and no payment run twice in any of
// them (RELIABILITY.md has the figures). What the servers still leave
// open: the leader tracks the revisions of writes in flight in its own
// memory, and a new leader starts without that list (nats-server issue
// 8469), so two takeovers of one key racing across a leader change are
// decided by a check that is not part of the replicated write; the tests
// did not see it happen. A leader election takes 4 to 9 s
// (JetStream's Raft election timeout): calls fail meanwhile, so use a lease
// longer than that, or the engine's Complete may give up before the stream
// answers again.
package nats
