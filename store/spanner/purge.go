package spanner

import (
	"context"

	sp "cloud.google.com/go/spanner"
)

// Purge implements store.Purger for tables without the schema's row
// deletion policy, or to delete now what the policy would delete within
// days. In rounds until a round finds fewer than the batch (WithPurgeBatch):
// a strong read-only query, which takes no locks, finds keys whose
// ExpiresAt has passed by the server's clock, and a read-write transaction
// deletes those of them that are still past it (a record renewed or
// completed in between stays). It reports how many rows it deleted and
// stops early with ctx's error; what was deleted stays deleted.
//
// Without an index on ExpiresAt (see Schema) each round scans the table
// until it has found a batch: on a large table, prefer the row deletion
// policy.
func (s *Store) Purge(ctx context.Context) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, wrap(ctx, "purge", err)
		}
		keys, err := s.expiredKeys(ctx)
		if err != nil {
			return total, wrap(ctx, "purge", err)
		}
		if len(keys) == 0 {
			return total, nil
		}
		var n int64
		err = s.transact(ctx, "purge", func(ctx context.Context, t txn) error {
			var err error
			n, err = t.tx.Update(ctx, sp.Statement{SQL: s.q.purgeDel, Params: map[string]any{"Keys": keys}})
			return err
		})
		if err != nil {
			return total, err
		}
		total += n
		if len(keys) < s.q.purgeBatch {
			return total, nil
		}
	}
}

// expiredKeys returns up to a batch of keys past their ExpiresAt.
func (s *Store) expiredKeys(ctx context.Context) ([]string, error) {
	ro := s.client.Single()
	defer ro.Close()
	it := ro.Query(ctx, sp.Statement{SQL: s.q.purgeFind, Params: map[string]any{"Limit": int64(s.q.purgeBatch)}})
	var keys []string
	err := it.Do(func(r *sp.Row) error {
		var k string
		if err := r.Column(0, &k); err != nil {
			return err
		}
		keys = append(keys, k)
		return nil
	})
	return keys, err
}
