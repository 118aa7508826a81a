package main

import (
	"flag"
	"fmt"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/cache"
	"github.com/idemkit/idemkit/store/seal"
)

// wrapConfig says which decorators wrap the demo's store (-cache,
// -seal-key-file).
type wrapConfig struct {
	Cache       bool   // keep completed records in process memory (store/cache)
	SealKeyFile string // seal responses and fingerprints under the keys in this file (store/seal)
}

// wrapFlags registers -cache and -seal-key-file on fs.
func wrapFlags(fs *flag.FlagSet, w *wrapConfig) {
	fs.BoolVar(&w.Cache, "cache", w.Cache, "answer replays of completed keys from process memory (store/cache)")
	fs.StringVar(&w.SealKeyFile, "seal-key-file", w.SealKeyFile,
		"encrypt stored responses and fingerprints under the keys in this file, one \"id base64-secret\" line each, the last one current (store/seal; make a secret with: openssl rand -base64 32)")
}

// wrapStore returns st sealed and then cached, as the flags ask: what the
// cache holds is opened, what the store holds is sealed. Both keep the
// store's optional interfaces (Transactor, Purger), so transactional mode
// and the cleanup job work as without them, and closing the result closes
// st.
func wrapStore(w wrapConfig, st store.Store) (store.Store, error) {
	if w.SealKeyFile != "" {
		keys, err := seal.LoadKeyFile(w.SealKeyFile)
		if err != nil {
			return nil, fmt.Errorf("-seal-key-file: %w", err)
		}
		if st, err = seal.New(st, keys); err != nil {
			return nil, err
		}
	}
	if w.Cache {
		c, err := cache.New(st)
		if err != nil {
			return nil, err
		}
		st = c
	}
	return st, nil
}
