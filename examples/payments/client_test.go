package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/idemclient"
	"github.com/idemkit/idemkit/internal/faultproxy"
)

// TestClientLostReplies sends N logical payments with idemclient through a
// proxy that loses the reply to each one's first attempt: every payment is
// made once, and the client gets its first answer back as a replay.
func TestClientLostReplies(t *testing.T) {
	for _, sc := range storeCases() {
		t.Run(sc.name, func(t *testing.T) {
			d := startDemo(t, sc.cfg(t))
			px, err := faultproxy.New(strings.TrimPrefix(d.srv.URL, "http://"))
			require.NoError(t, err)
			t.Cleanup(func() { px.Close() })
			base := &http.Transport{}
			t.Cleanup(base.CloseIdleConnections)
			tr, err := idemclient.New(
				idemclient.WithBase(base),
				idemclient.WithBackoff(5*time.Millisecond, 50*time.Millisecond),
			)
			require.NoError(t, err)
			client := &http.Client{Transport: tr}
			const n = 5
			for i := range n {
				body := fmt.Sprintf(`{"amount":%d}`, 7001+i)
				px.LoseReplyTo([]byte(body))
				resp, err := client.Post("http://"+px.Addr()+"/payments", "application/json", strings.NewReader(body))
				require.NoError(t, err)
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resp.StatusCode, "body %s", b)
				assert.True(t, idemclient.Replayed(resp), "payment %d: the answer after the lost reply is the replay", i)
				assert.Contains(t, string(b), fmt.Sprintf(`"amount":%d`, 7001+i))
				assert.Equal(t, i+1, d.count(), "payment %d made once", i)
			}
		})
	}
}
