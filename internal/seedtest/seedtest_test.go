package seedtest_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/seedtest"
	"github.com/idemkit/idemkit/store/memory"
)

func TestMemory(t *testing.T) {
	st, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seedtest.Run(t, st)
}
