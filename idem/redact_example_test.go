package idem_test

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store/memory"
)

// Errors (and log lines) name a key only redacted. Here every process shares
// one secret, so the same key hashes alike everywhere; without
// WithKeyRedactor the secret is drawn once per process.
func ExampleWithKeyRedactor() {
	ctx := context.Background()
	st, err := memory.New()
	if err != nil {
		panic(err)
	}
	defer st.Close()
	red, err := keyer.HashKeys([]byte("a shared secret, 16+ bytes")) // from your secret store
	if err != nil {
		panic(err)
	}
	e, err := idem.New(st, idem.WithKeyRedactor(red))
	if err != nil {
		panic(err)
	}
	pay := func(context.Context) (string, error) { return "paid", nil }
	if _, err := idem.Do(ctx, e, "order-1", pay, idem.WithScope("tenant-acme"), idem.WithFingerprint("amount=1990")); err != nil {
		panic(err)
	}
	_, err = idem.Do(ctx, e, "order-1", pay, idem.WithScope("tenant-acme"), idem.WithFingerprint("amount=9999"))
	fmt.Println(err)
	fmt.Println(err.Error() == `idem: do "`+red(doKey("order-1", "tenant-acme"))+`": idem: key used with a different fingerprint`)
	// Output:
	// idem: do "hmac:76923faef90698ff90ec795f59463e8f": idem: key used with a different fingerprint
	// true
}

func doKey(key string, scope ...string) string {
	k, _ := idem.DoKey(key, scope...)
	return k
}
