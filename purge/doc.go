// Package purge runs a store's cleanup periodically: every interval (with
// jitter, so replicas started together do not purge together) it calls
// store.Purger.Purge, which deletes records whose retention is over and
// in-progress records whose lease lapsed, and reports what each run deleted
// and how it failed to a logger and to observers (metrics).
//
// Stores whose engine expires keys by itself (Redis) need no job. For the
// SQL stores the job is what keeps the table, and the database file, from
// growing with every key ever seen; see Job for what reaches the disk.
//
//	if p, ok := st.(store.Purger); ok { // SQL and memory stores; Redis expires records itself
//		go purge.Run(ctx, p, purge.WithInterval(10*time.Minute), purge.WithLogger(logger))
//	}
//
// purge imports the standard library and package store only.
package purge
