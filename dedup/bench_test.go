package dedup_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
)

// BenchmarkProcess compares, on each backend and in the same run, dedup's
// Process with the raw store calls doing the same work by hand (a claim and
// a completion for a new id; a claim for a duplicate). The difference is
// dedup's own cost: the key, the token, the heartbeat's timer, and the
// context Complete runs in (not cancelled with the caller's, bounded by the
// lease). The raw side uses context.Background, which drivers handle without
// a watcher; on SQLite the bounded context alone costs about 45µs per
// Complete (modernc starts an interrupt watcher for a cancellable context),
// a cost any caller with a cancellable context pays on raw calls too.
//
//	go test -run '^$' -bench . -benchtime 2000x -benchmem ./dedup/
func BenchmarkProcess(b *testing.B) {
	for _, be := range backends {
		if be.name == "memory-realclock" || be.name == "redis-cluster" {
			continue
		}
		b.Run(be.name, func(b *testing.B) {
			subj := be.new(b)
			d, err := newDedup(subj.Store)
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			next := func() string { return "evt_" + strconv.FormatInt(seq.Add(1), 10) }
			noop := func(context.Context) error { return nil }
			s := subj.Store
			ctx := context.Background()

			b.Run("New/raw", func(b *testing.B) {
				for b.Loop() {
					key := keyOf(d, next())
					tok := store.NewToken()
					c, err := s.Claim(ctx, key, "dedup/v1", tok, idem.DefaultLease)
					if err != nil || c.Outcome != store.Acquired {
						b.Fatal(c.Outcome, err)
					}
					if err := s.Complete(ctx, key, tok, nil, idem.DefaultRetention); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("New/dedup", func(b *testing.B) {
				for b.Loop() {
					if out, err := d.Process(ctx, next(), noop); out != dedup.Processed {
						b.Fatal(out, err)
					}
				}
			})

			dup := next()
			if out, err := d.Process(ctx, dup, noop); out != dedup.Processed {
				b.Fatal(out, err)
			}
			b.Run("Duplicate/raw", func(b *testing.B) {
				key := keyOf(d, dup)
				for b.Loop() {
					c, err := s.Claim(ctx, key, "dedup/v1", store.NewToken(), idem.DefaultLease)
					if err != nil || c.Outcome != store.Completed {
						b.Fatal(c.Outcome, err)
					}
				}
			})
			b.Run("Duplicate/dedup", func(b *testing.B) {
				for b.Loop() {
					if out, err := d.Process(ctx, dup, noop); out != dedup.Duplicate {
						b.Fatal(out, err)
					}
				}
			})

			b.Run("NewParallel/raw", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						key := keyOf(d, next())
						tok := store.NewToken()
						if _, err := s.Claim(ctx, key, "dedup/v1", tok, idem.DefaultLease); err != nil {
							b.Error(err)
							return
						}
						if err := s.Complete(ctx, key, tok, nil, idem.DefaultRetention); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
			b.Run("NewParallel/dedup", func(b *testing.B) {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if out, err := d.Process(ctx, next(), noop); out != dedup.Processed {
							b.Error(out, err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkProcessTx compares ProcessTx with the same transaction written by
// hand (InTx: claim, the effect's INSERT, complete).
func BenchmarkProcessTx(b *testing.B) {
	for _, be := range backends {
		if be.tx == nil {
			continue
		}
		b.Run(be.name, func(b *testing.B) {
			subj := be.new(b)
			fx := be.tx(b, subj)
			d, err := newDedup(subj.Store)
			if err != nil {
				b.Fatal(err)
			}
			tr := subj.Store.(store.Transactor)
			var seq atomic.Int64
			next := func() string { return "evt_" + strconv.FormatInt(seq.Add(1), 10) }
			ctx := context.Background()

			b.Run("New/raw", func(b *testing.B) {
				for b.Loop() {
					id := next()
					key := keyOf(d, id)
					err := tr.InTx(ctx, func(ctx context.Context, s store.Store) error {
						tok := store.NewToken()
						if _, err := s.Claim(ctx, key, "dedup/v1", tok, idem.DefaultLease); err != nil {
							return err
						}
						if err := fx.apply(ctx, id); err != nil {
							return err
						}
						return s.Complete(ctx, key, tok, nil, idem.DefaultRetention)
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("New/dedup", func(b *testing.B) {
				for b.Loop() {
					id := next()
					if out, err := d.ProcessTx(ctx, id, func(ctx context.Context) error { return fx.apply(ctx, id) }); out != dedup.Processed {
						b.Fatal(out, err)
					}
				}
			})
		})
	}
}
