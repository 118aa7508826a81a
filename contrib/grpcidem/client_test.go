package grpcidem

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/faultproxy"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// keyLog is a server interceptor, outermost, that records the key of every
// attempt that reaches the server.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	k.mu.Lock()
	k.keys = append(k.keys, md.Get(MetadataKey)...)
	if len(md.Get(MetadataKey)) == 0 {
		k.keys = append(k.keys, "")
	}
	k.mu.Unlock()
	return h(ctx, req)
}

func (k *keyLog) all() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.keys...)
}

func ref(s string) *structpb.Struct {
	v, _ := structpb.NewStruct(map[string]any{"ref": s, "amount": 100.0})
	return v
}

// TestClientRetryAfterDroppedReply: the handler runs, the reply is lost
// (the connection is cut before it leaves: by the server over bufconn, by a
// fault proxy over TCP); the client interceptor's retry, with the same key,
// gets the replay, and the handler ran once.
func TestClientRetryAfterDroppedReply(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := memEngine(t)
			log := &keyLog{}
			ci, err := UnaryClientInterceptor(WithBackoff(5*time.Millisecond, 20*time.Millisecond))
			require.NoError(t, err)
			var ev *env
			var once sync.Once
			var px *faultproxy.Proxy
			cut := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				if tr.name == "bufconn" {
					once.Do(ev.lis.cutAll) // the reply has nowhere to go
				}
				return resp, err
			}
			sis := []grpc.UnaryServerInterceptor{log.intercept, cut, serverICPT(t, e)}
			if tr.name == "tcp" {
				ev = start(t, tr, &payments{}, sis)
				var err error
				px, err = faultproxy.New(ev.addr)
				require.NoError(t, err)
				t.Cleanup(func() { px.Close() })
				conn, err := grpc.NewClient(px.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(ci))
				require.NoError(t, err)
				t.Cleanup(func() { conn.Close() })
				ev.conn = conn
				px.LoseReplyTo([]byte("pay-lost-reply"))
			} else {
				ev = start(t, tr, &payments{}, sis, grpc.WithUnaryInterceptor(ci))
			}

			var replayed bool
			resp := new(structpb.Struct)
			err = ev.conn.Invoke(t.Context(), payMethod, ref("pay-lost-reply"), resp, Replayed(&replayed))
			require.NoError(t, err)
			assert.True(t, replayed, "the answer after the lost reply is the replay")
			assert.Equal(t, 1.0, resp.Fields["id"].GetNumberValue())
			assert.Equal(t, int32(1), ev.p.calls.Load(), "the handler ran once")
			keys := log.all()
			require.Len(t, keys, 2, "two attempts reached the server")
			assert.Equal(t, keys[0], keys[1], "with the same key")
			assert.NotEmpty(t, keys[0])

			// A new logical call gets a new key and runs.
			require.NoError(t, ev.conn.Invoke(t.Context(), payMethod, ref("pay-next"), resp, Replayed(&replayed)))
			assert.False(t, replayed)
			assert.Equal(t, int32(2), ev.p.calls.Load())
			assert.NotEqual(t, keys[0], log.all()[2])
		})
	}
}

// TestClientHonoursRetryInfo: the client meets its key in flight (Aborted +
// RetryInfo), waits what the server said, and gets the replay.
func TestClientHonoursRetryInfo(t *testing.T) {
	e := memEngine(t, idem.WithLease(2*time.Second))
	entered, release := make(chan struct{}), make(chan struct{})
	p := &payments{}
	p.handle = func(ctx context.Context, _ string, req *structpb.Struct) (*structpb.Struct, error) {
		close(entered)
		<-release
		return req, nil
	}
	c := mustClient(t)
	var mu sync.Mutex
	var waits []time.Duration
	first := make(chan answer, 1)
	firstDone := make(chan struct{})
	c.policy.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		close(release)
		<-firstDone // the first call is done: the retry replays
		return nil
	}
	ev := start(t, transports[0], p, []grpc.UnaryServerInterceptor{serverICPT(t, e)}, grpc.WithUnaryInterceptor(c.intercept))
	go func() {
		first <- call(t.Context(), ev.conn, payMethod, "order-9", amount(3))
		close(firstDone)
	}()
	<-entered
	var replayed bool
	resp := new(structpb.Struct)
	err := ev.conn.Invoke(WithKey(t.Context(), "order-9"), payMethod, amount(3), resp, Replayed(&replayed))
	require.NoError(t, err)
	assert.True(t, replayed)
	assert.Equal(t, int32(1), p.calls.Load())
	require.NoError(t, (<-first).err)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, waits, 1)
	assert.GreaterOrEqual(t, waits[0], DefaultRetryDelay, "the server's RetryInfo")
	assert.Less(t, waits[0], DefaultRetryDelay+DefaultRetryDelay/10+time.Millisecond)
}

func TestClientRetries(t *testing.T) {
	down := downEngine(t)
	t.Run("keyed: bounded attempts, one key", func(t *testing.T) {
		log := &keyLog{}
		c := mustClient(t, WithMaxAttempts(3))
		var slept []time.Duration
		c.policy.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
		ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{log.intercept, serverICPT(t, down)}, grpc.WithUnaryInterceptor(c.intercept))
		err := ev.conn.Invoke(t.Context(), payMethod, amount(1), new(structpb.Struct))
		assert.Equal(t, codes.Unavailable, status.Code(err))
		keys := log.all()
		require.Len(t, keys, 3)
		assert.Equal(t, []string{keys[0], keys[0], keys[0]}, keys)
		require.Len(t, slept, 2)
		for _, d := range slept {
			assert.GreaterOrEqual(t, d, time.Second, "the server's RetryInfo (1s) is honoured")
		}
	})
	t.Run("no key: sent once", func(t *testing.T) {
		log := &keyLog{}
		c := mustClient(t, WithKeyedMethods(func(string) bool { return false }))
		c.policy.Sleep = func(context.Context, time.Duration) error {
			t.Error("slept: a call without a key was retried")
			return nil
		}
		ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{log.intercept, serverICPT(t, down, WithPolicy(func(string) Policy { return Optional }))}, grpc.WithUnaryInterceptor(c.intercept))
		p := ev.p
		p.handle = func(context.Context, string, *structpb.Struct) (*structpb.Struct, error) {
			return nil, status.Error(codes.Unavailable, "busy")
		}
		err := ev.conn.Invoke(t.Context(), payMethod, amount(1), new(structpb.Struct))
		assert.Equal(t, codes.Unavailable, status.Code(err))
		assert.Equal(t, []string{""}, log.all())
	})
	t.Run("caller's key kept; final codes not retried", func(t *testing.T) {
		log := &keyLog{}
		c := mustClient(t)
		c.policy.Sleep = func(context.Context, time.Duration) error { return nil }
		e := memEngine(t)
		ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{log.intercept, serverICPT(t, e)}, grpc.WithUnaryInterceptor(c.intercept))
		ctx := metadata.AppendToOutgoingContext(t.Context(), MetadataKey, "mine")
		require.NoError(t, ev.conn.Invoke(ctx, payMethod, amount(1), new(structpb.Struct)))
		err := ev.conn.Invoke(ctx, payMethod, amount(2), new(structpb.Struct))
		assert.Equal(t, codes.FailedPrecondition, status.Code(err))
		assert.Equal(t, []string{"mine", "mine"}, log.all(), "FailedPrecondition is final")
	})
}

func TestClientWithKey(t *testing.T) {
	e := memEngine(t)
	log := &keyLog{}
	ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{log.intercept, serverICPT(t, e)}, grpc.WithUnaryInterceptor(mustClient(t).intercept))
	ctx := WithKey(t.Context(), "order-77")
	var replayed bool
	require.NoError(t, ev.conn.Invoke(ctx, payMethod, amount(1), new(structpb.Struct), Replayed(&replayed)))
	assert.False(t, replayed)
	require.NoError(t, ev.conn.Invoke(ctx, payMethod, amount(1), new(structpb.Struct), Replayed(&replayed)))
	assert.True(t, replayed, "the same call again with its key: the replay")

	err := ev.conn.Invoke(ctx, payMethod, amount(2), new(structpb.Struct))
	assert.ErrorIs(t, err, ErrKeyReused)
	err = ev.conn.Invoke(ctx, refundMethod, amount(1), new(structpb.Struct))
	assert.ErrorIs(t, err, ErrKeyReused)
	for _, bad := range []string{"", "a b", "é"} {
		err = ev.conn.Invoke(WithKey(t.Context(), bad), payMethod, amount(1), new(structpb.Struct))
		assert.ErrorIs(t, err, ErrInvalidKey, "%q", bad)
	}
	assert.Equal(t, []string{"order-77", "order-77"}, log.all(), "refused calls are not sent")
	assert.Equal(t, int32(1), ev.p.calls.Load())
}

// mustClient returns newClient(opts...), failing the test if it fails.
func mustClient(t testing.TB, opts ...ClientOption) *client {
	t.Helper()
	c, err := newClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientOptionsRefuseBadValues(t *testing.T) {
	for name, opt := range map[string]ClientOption{
		"nil option":            nil,
		"WithMaxAttempts(0)":    WithMaxAttempts(0),
		"WithBackoff(0, 0)":     WithBackoff(0, 0),
		"WithBackoff(2s, 1s)":   WithBackoff(2*time.Second, time.Second),
		"WithMaxRetryDelay(-1)": WithMaxRetryDelay(-1),
		"WithKeyedMethods(nil)": WithKeyedMethods(nil),
		"WithKeyFunc(nil)":      WithKeyFunc(nil),
	} {
		t.Run(name, func(t *testing.T) {
			ci, err := UnaryClientInterceptor(opt)
			assert.Nil(t, ci)
			require.ErrorIs(t, err, store.ErrInvalid)
			assert.Equal(t, 1, strings.Count(err.Error(), "invalid argument"), err.Error())
		})
	}
}

func TestClientKeyRuleIsKeyers(t *testing.T) {
	for _, key := range []string{"a b", " lead", "null", "", strings.Repeat("k", keyer.MaxKeyLen+1)} {
		assert.ErrorIs(t, validKey(key), ErrInvalidKey, "%q", key)
		assert.Error(t, keyer.CheckKey(key))
	}
	assert.NoError(t, validKey(`q"uote`))
}
