package grpcidem

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
	"github.com/idemkit/idemkit/store/redis"
	"github.com/idemkit/idemkit/store/sqlite"
)

// memEngine is an engine on a fresh memory store that reports a key in
// flight at once (idem.WithWait(0)) unless opts say otherwise.
func memEngine(t *testing.T, opts ...idem.Option) *idem.Engine {
	t.Helper()
	st, err := memory.New()
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err := idem.New(st, append([]idem.Option{idem.WithWait(0)}, opts...)...)
	require.NoError(t, err)
	return e
}

func serverICPT(t *testing.T, e *idem.Engine, opts ...ServerOption) grpc.UnaryServerInterceptor {
	t.Helper()
	si, err := UnaryServerInterceptor(e, opts...)
	require.NoError(t, err)
	return si
}

func amount(v float64) *structpb.Struct {
	s, _ := structpb.NewStruct(map[string]any{"amount": v})
	return s
}

type answer struct {
	resp     *structpb.Struct
	err      error
	replayed bool
}

// call invokes method with key ("" for none) and the given metadata pairs.
func call(ctx context.Context, conn *grpc.ClientConn, method, key string, req *structpb.Struct, kv ...string) answer {
	if key != "" {
		kv = append(kv, MetadataKey, key)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	var hdr, trl metadata.MD
	resp := new(structpb.Struct)
	err := conn.Invoke(ctx, method, req, resp, grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		resp = nil
	}
	return answer{resp, err, IsReplayed(hdr) || IsReplayed(trl)}
}

func TestTenConcurrentOneRun(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			e := memEngine(t, idem.WithWait(10*time.Second))
			ev := start(t, tr, &payments{}, []grpc.UnaryServerInterceptor{serverICPT(t, e)})
			answers := make([]answer, 10)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() { answers[i] = call(t.Context(), ev.conn, payMethod, "k-ten", amount(1990)) })
			}
			wg.Wait()
			replays := 0
			for _, a := range answers {
				require.NoError(t, a.err)
				assert.True(t, proto.Equal(answers[0].resp, a.resp), "every call gets the same response")
				if a.replayed {
					replays++
				}
			}
			assert.Equal(t, 1990.0, answers[0].resp.Fields["amount"].GetNumberValue())
			assert.Equal(t, int32(1), ev.p.calls.Load(), "the handler ran once")
			assert.Equal(t, 9, replays)

			// Same key, another request or another method: refused.
			a := call(t.Context(), ev.conn, payMethod, "k-ten", amount(5))
			assert.Equal(t, codes.FailedPrecondition, status.Code(a.err), "%v", a.err)
			a = call(t.Context(), ev.conn, refundMethod, "k-ten", amount(1990))
			assert.Equal(t, codes.FailedPrecondition, status.Code(a.err), "%v", a.err)
			assert.Equal(t, int32(1), ev.p.calls.Load())
		})
	}
}

// TestInFlightAborted: with idem.WithWait(0), a duplicate in flight gets Aborted
// with a RetryInfo saying when the lease lapses.
func TestInFlightAborted(t *testing.T) {
	e := memEngine(t, idem.WithLease(5*time.Second))
	entered, release := make(chan struct{}), make(chan struct{})
	p := &payments{}
	p.handle = func(ctx context.Context, _ string, req *structpb.Struct) (*structpb.Struct, error) {
		close(entered)
		<-release
		return req, nil
	}
	ev := start(t, transports[0], p, []grpc.UnaryServerInterceptor{serverICPT(t, e)})
	long := start(t, transports[0], p, []grpc.UnaryServerInterceptor{serverICPT(t, e, WithRetryDelay(time.Minute))})
	first := make(chan answer, 1)
	go func() { first <- call(t.Context(), ev.conn, payMethod, "k-busy", amount(1)) }()
	<-entered
	a := call(t.Context(), ev.conn, payMethod, "k-busy", amount(1))
	require.Equal(t, codes.Aborted, status.Code(a.err), "%v", a.err)
	d, ok := retryDelay(status.Convert(a.err))
	require.True(t, ok, "RetryInfo detail")
	assert.Equal(t, DefaultRetryDelay, d)
	// A longer retry delay is cut to the lease's remaining time.
	a = call(t.Context(), long.conn, payMethod, "k-busy", amount(1))
	require.Equal(t, codes.Aborted, status.Code(a.err), "%v", a.err)
	d, _ = retryDelay(status.Convert(a.err))
	assert.Greater(t, d, 3*time.Second)
	assert.LessOrEqual(t, d, 5*time.Second)
	close(release)
	require.NoError(t, (<-first).err)
	a = call(t.Context(), ev.conn, payMethod, "k-busy", amount(1))
	require.NoError(t, a.err)
	assert.True(t, a.replayed)
	assert.Equal(t, int32(1), p.calls.Load())
}

func TestKeyPolicy(t *testing.T) {
	e := memEngine(t)
	ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{serverICPT(t, e,
		WithPolicy(func(m string) Policy {
			switch m {
			case refundMethod:
				return Optional
			case unregMethod:
				return Skip
			}
			return Required
		}))})
	cases := []struct {
		name   string
		method string
		kv     []string
		code   codes.Code
	}{
		{"required, missing", payMethod, nil, codes.InvalidArgument},
		{"malformed", payMethod, []string{MetadataKey, "null"}, codes.InvalidArgument},
		{"space inside", payMethod, []string{MetadataKey, "a b"}, codes.InvalidArgument},
		{"two keys", payMethod, []string{MetadataKey, "a", MetadataKey, "b"}, codes.InvalidArgument},
		{"quoted key", payMethod, []string{MetadataKey, `"k-q"`}, codes.OK},
		{"optional, missing", refundMethod, nil, codes.OK},
		{"skipped", unregMethod, nil, codes.OK},
	}
	for _, tc := range cases {
		before := ev.p.calls.Load()
		a := call(t.Context(), ev.conn, tc.method, "", amount(1), tc.kv...)
		assert.Equal(t, tc.code, status.Code(a.err), "%s: %v", tc.name, a.err)
		ran := ev.p.calls.Load() - before
		if tc.code == codes.OK {
			assert.Equal(t, int32(1), ran, tc.name)
		} else {
			assert.Zero(t, ran, "%s: the handler did not run", tc.name)
		}
	}
	// The quoted and the bare spelling are the same key.
	a := call(t.Context(), ev.conn, payMethod, "k-q", amount(1))
	require.NoError(t, a.err)
	assert.True(t, a.replayed)
}

// downEngine is an engine on a Redis store whose server is not there: a
// loopback port nothing listens on, so every dial is refused.
func downEngine(t *testing.T) *idem.Engine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	client := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { client.Close() })
	st, err := redis.New(client, redis.WithEvictionCheck(false))
	require.NoError(t, err)
	e, err := idem.New(st)
	require.NoError(t, err)
	return e
}

func TestStoreUnavailable(t *testing.T) {
	ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{serverICPT(t, downEngine(t))})
	a := call(t.Context(), ev.conn, payMethod, "k-down", amount(1))
	require.Equal(t, codes.Unavailable, status.Code(a.err), "%v", a.err)
	_, ok := retryDelay(status.Convert(a.err))
	assert.True(t, ok, "RetryInfo detail")
	assert.Zero(t, ev.p.calls.Load(), "the handler did not run")
}

func TestHandlerErrors(t *testing.T) {
	e := memEngine(t)
	p := &payments{}
	p.handle = func(_ context.Context, _ string, req *structpb.Struct) (*structpb.Struct, error) {
		switch req.Fields["amount"].GetNumberValue() {
		case 404:
			st, _ := status.New(codes.NotFound, "no such account").WithDetails(&errdetails.ErrorInfo{Reason: "ACCOUNT_MISSING", Domain: "pay.example"})
			return nil, st.Err()
		case 503:
			return nil, status.Error(codes.Unavailable, "provider down")
		case 1:
			return nil, errors.New("plain error") // Unknown: released
		}
		return req, nil
	}
	ev := start(t, transports[1], p, []grpc.UnaryServerInterceptor{serverICPT(t, e)})

	first := call(t.Context(), ev.conn, payMethod, "k-404", amount(404))
	again := call(t.Context(), ev.conn, payMethod, "k-404", amount(404))
	require.Equal(t, codes.NotFound, status.Code(first.err))
	require.Equal(t, codes.NotFound, status.Code(again.err))
	assert.True(t, again.replayed, "a kept error status is replayed, marked")
	assert.False(t, first.replayed)
	assert.Equal(t, status.Convert(first.err).Message(), status.Convert(again.err).Message())
	details := status.Convert(again.err).Details()
	require.Len(t, details, 1)
	assert.Equal(t, "ACCOUNT_MISSING", details[0].(*errdetails.ErrorInfo).GetReason())
	assert.Equal(t, int32(1), p.calls.Load())

	for _, amt := range []float64{503, 1} {
		key := fmt.Sprintf("k-%v", amt)
		a := call(t.Context(), ev.conn, payMethod, key, amount(amt))
		require.Error(t, a.err)
		before := p.calls.Load()
		b := call(t.Context(), ev.conn, payMethod, key, amount(amt))
		assert.Equal(t, status.Code(a.err), status.Code(b.err))
		assert.False(t, b.replayed)
		assert.Equal(t, before+1, p.calls.Load(), "%v released the key: the retry ran", status.Code(a.err))
	}
}

func TestScope(t *testing.T) {
	e := memEngine(t)
	scope := WithScope(func(ctx context.Context) ([]string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		u := md.Get("x-user")
		switch {
		case len(u) == 0:
			return nil, ErrUnauthenticated
		case u[0] == "broken":
			return nil, errors.New("directory down")
		}
		return u, nil
	})
	ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{serverICPT(t, e, scope)})
	alice := call(t.Context(), ev.conn, payMethod, "k-s", amount(1), "x-user", "alice")
	bob := call(t.Context(), ev.conn, payMethod, "k-s", amount(1), "x-user", "bob")
	require.NoError(t, alice.err)
	require.NoError(t, bob.err)
	assert.False(t, bob.replayed, "another caller's same key is another operation")
	assert.False(t, proto.Equal(alice.resp, bob.resp))
	assert.Equal(t, codes.Unauthenticated, status.Code(call(t.Context(), ev.conn, payMethod, "k-s", amount(1)).err))
	assert.Equal(t, codes.Internal, status.Code(call(t.Context(), ev.conn, payMethod, "k-s", amount(1), "x-user", "broken").err))
	assert.Equal(t, int32(2), ev.p.calls.Load())
}

func TestResponseType(t *testing.T) {
	e := memEngine(t)
	ev := start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{serverICPT(t, e)})
	a := call(t.Context(), ev.conn, unregMethod, "k-u", amount(1))
	assert.Equal(t, codes.Internal, status.Code(a.err), "%v", a.err)
	assert.Zero(t, ev.p.calls.Load(), "not run when a replay could not be decoded")

	ev = start(t, transports[0], &payments{}, []grpc.UnaryServerInterceptor{serverICPT(t, e, WithResponseType(unregMethod, &structpb.Struct{}))})
	require.NoError(t, call(t.Context(), ev.conn, unregMethod, "k-u", amount(1)).err)
	a = call(t.Context(), ev.conn, unregMethod, "k-u", amount(1))
	require.NoError(t, a.err)
	assert.True(t, a.replayed)
	assert.Equal(t, int32(1), ev.p.calls.Load())
}

func TestNewRejects(t *testing.T) {
	_, err := UnaryServerInterceptor(nil)
	assert.ErrorIs(t, err, ErrInvalid)
	e := memEngine(t)
	for _, o := range []ServerOption{nil, WithScope(nil), WithPolicy(nil), WithKeep(nil), WithResponseType("/a/b", nil), WithTransactions(), WithRetryDelay(0), WithMaxResponse(0)} {
		_, err := UnaryServerInterceptor(e, o)
		assert.ErrorIs(t, err, ErrInvalid)
	}
}

// TestTransactional: on SQLite in transactional mode the handler writes
// through the transaction in its context; ten concurrent calls, one row.
func TestTransactional(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	require.NoError(t, st.Migrate(t.Context()))
	_, err = st.DB().Exec(`CREATE TABLE payments (id INTEGER PRIMARY KEY AUTOINCREMENT, amount REAL NOT NULL)`)
	require.NoError(t, err)
	e, err := idem.New(st)
	require.NoError(t, err)
	p := &payments{}
	p.handle = func(ctx context.Context, _ string, req *structpb.Struct) (*structpb.Struct, error) {
		tx, ok := sqlite.TxFrom(ctx)
		if !ok {
			return nil, status.Error(codes.Internal, "no transaction")
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO payments (amount) VALUES (?)`, req.Fields["amount"].GetNumberValue())
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		id, _ := res.LastInsertId()
		return structpb.NewStruct(map[string]any{"id": float64(id)})
	}
	ev := start(t, transports[0], p, []grpc.UnaryServerInterceptor{serverICPT(t, e, WithTransactions())})
	answers := make([]answer, 10)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() { answers[i] = call(t.Context(), ev.conn, payMethod, "k-tx", amount(12)) })
	}
	wg.Wait()
	for _, a := range answers {
		require.NoError(t, a.err)
		assert.True(t, proto.Equal(answers[0].resp, a.resp))
	}
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT count(*) FROM payments`).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestResponseTooLarge(t *testing.T) {
	big := func(_ context.Context, _ string, req *structpb.Struct) (*structpb.Struct, error) {
		return structpb.NewStruct(map[string]any{"blob": strings.Repeat("x", 2000)})
	}
	t.Run("lease: returned, then AlreadyExists", func(t *testing.T) {
		e := memEngine(t)
		p := &payments{handle: big}
		ev := start(t, transports[0], p, []grpc.UnaryServerInterceptor{serverICPT(t, e, WithMaxResponse(1000))})
		a := call(t.Context(), ev.conn, payMethod, "k-big", amount(1))
		require.NoError(t, a.err)
		assert.Len(t, a.resp.Fields["blob"].GetStringValue(), 2000, "the caller gets its response")
		a = call(t.Context(), ev.conn, payMethod, "k-big", amount(1))
		assert.Equal(t, codes.AlreadyExists, status.Code(a.err), "%v", a.err)
		assert.Equal(t, int32(1), p.calls.Load(), "done once; its retry does not run it again")
	})
	t.Run("transactional: rolled back, Internal", func(t *testing.T) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "idem.db"))
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		require.NoError(t, st.Migrate(t.Context()))
		e, err := idem.New(st)
		require.NoError(t, err)
		p := &payments{handle: big}
		ev := start(t, transports[0], p, []grpc.UnaryServerInterceptor{serverICPT(t, e, WithMaxResponse(1000), WithTransactions())})
		a := call(t.Context(), ev.conn, payMethod, "k-big", amount(1))
		assert.Equal(t, codes.Internal, status.Code(a.err), "%v", a.err)
		a = call(t.Context(), ev.conn, payMethod, "k-big", amount(1))
		assert.Equal(t, codes.Internal, status.Code(a.err), "rolled back: the retry runs again")
		assert.Equal(t, int32(2), p.calls.Load())
	})
}
