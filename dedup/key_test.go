package dedup_test

import (
	"testing"

	"github.com/idemkit/idemkit/dedup"
	"github.com/idemkit/idemkit/store/memory"
)

// FuzzKeyInjective: two different (scope, id) pairs never share a store key,
// whatever characters scopes and ids contain.
func FuzzKeyInjective(f *testing.F) {
	f.Add("a:b", "c", "a", "b:c")
	f.Add("", "1::x", "1", ":x")
	f.Add("stripe", "evt_1", "stripe", "evt_1")
	f.Add("0", "", "", "0::")
	f.Add("10", "x", "1", "0:x")
	s := mustMemory(f, memory.WithSweepInterval(0))
	f.Fuzz(func(t *testing.T, scope1, id1, scope2, id2 string) {
		d1, err1 := newDedup(s, dedup.WithScope(scope1))
		d2, err2 := newDedup(s, dedup.WithScope(scope2))
		if err1 != nil || err2 != nil {
			return // a scope the store cannot hold is rejected by New
		}
		same := scope1 == scope2 && id1 == id2
		k1, err1 := d1.Key(id1)
		k2, err2 := d2.Key(id2)
		if err1 != nil || err2 != nil {
			return // an id ScopedKey refuses
		}
		if (k1 == k2) != same {
			t.Fatalf("(%q, %q) → %q and (%q, %q) → %q", scope1, id1, k1, scope2, id2, k2)
		}
	})
}
