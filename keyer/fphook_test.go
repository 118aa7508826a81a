package keyer_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/fphook"
	"github.com/idemkit/idemkit/keyer"
)

// The hook httpidem's lease mode fingerprints with gives Fingerprint's
// result, reads the body into the buffer it is given when that is large
// enough, and leaves the body drained; over the limit it fails as
// Fingerprint does and hands back the buffer, emptied.
func TestFingerprintIntoIsFingerprint(t *testing.T) {
	f, err := keyer.NewFingerprinter(keyer.WithMaxBody(100))
	require.NoError(t, err)
	buf := make([]byte, 0, 200)
	for _, body := range []string{"", "{}", strings.Repeat("b", 100)} {
		want, err := f.Fingerprint(httptest.NewRequest("POST", "/p?q=1", strings.NewReader(body)))
		require.NoError(t, err)
		r := httptest.NewRequest("POST", "/p?q=1", strings.NewReader(body))
		fp, got, err := fphook.Fingerprint(f, r, buf)
		require.NoError(t, err)
		assert.Equal(t, want, fp, "body %q", body)
		assert.Equal(t, body, string(got))
		if len(body) > 0 {
			assert.Same(t, &buf[:1][0], &got[:1][0], "the body is read into the buffer given")
		}
		rest, _ := io.ReadAll(r.Body)
		assert.Empty(t, rest, "r.Body is left drained, not replaced")
	}
	r := httptest.NewRequest("POST", "/p", strings.NewReader(strings.Repeat("x", 101)))
	r.ContentLength = -1
	_, got, err := fphook.Fingerprint(f, r, buf)
	assert.True(t, errors.Is(err, keyer.ErrBodyTooLarge), "%v", err)
	assert.Empty(t, got)
	assert.Equal(t, cap(buf), cap(got), "the buffer comes back for reuse")
	// A buffer too small is replaced.
	fp, got, err := fphook.Fingerprint(f, httptest.NewRequest("POST", "/p", strings.NewReader("{}")), nil)
	require.NoError(t, err)
	want, _ := f.Fingerprint(httptest.NewRequest("POST", "/p", strings.NewReader("{}")))
	assert.Equal(t, want, fp)
	assert.Equal(t, "{}", string(got))
}
