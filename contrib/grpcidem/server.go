package grpcidem

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/internal/invalid"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
)

// Metadata keys.
const (
	// MetadataKey is the request metadata that carries the idempotency key.
	MetadataKey = "idempotency-key"
	// ReplayedKey is set to "true" in the header (and trailer) metadata of
	// a replayed answer.
	ReplayedKey = "idempotent-replayed"
)

// ErrUnauthenticated may be wrapped by the WithScope function's error to
// answer Unauthenticated instead of Internal.
var ErrUnauthenticated = errors.New("grpcidem: unauthenticated")

// ErrInvalid is returned by UnaryServerInterceptor for a nil engine or
// option value.
var ErrInvalid = store.ErrInvalid

// Policy says what the server interceptor does with a method's calls.
type Policy uint8

const (
	// Required: a call without a key is refused (InvalidArgument).
	Required Policy = iota + 1
	// Optional: a call without a key runs unprotected.
	Optional
	// Skip: the interceptor lets the method's calls through untouched.
	Skip
)

// ServerOption configures UnaryServerInterceptor.
type ServerOption func(*server) error

// WithScope sets the function that says who is calling (the authenticated
// tenant or user, from your authentication interceptor's context); its
// parts scope the key (keyer.ScopedKey), so one caller can never replay
// another's response. Without it keys are global. Its error answers
// Internal, or Unauthenticated when it wraps ErrUnauthenticated.
func WithScope(fn func(ctx context.Context) ([]string, error)) ServerOption {
	return func(s *server) error {
		if fn == nil {
			return errors.New("nil scope function")
		}
		s.scope = fn
		return nil
	}
}

// WithPolicy sets each method's Policy from its full name
// ("/pkg.Service/Method"); the default is Required for every method.
func WithPolicy(fn func(fullMethod string) Policy) ServerOption {
	return func(s *server) error {
		if fn == nil {
			return errors.New("nil policy function")
		}
		s.policy = fn
		return nil
	}
}

// Methods returns a policy function for WithPolicy: p for the named full
// methods, Skip for the rest.
func Methods(p Policy, fullMethods ...string) func(string) Policy {
	set := make(map[string]bool, len(fullMethods))
	for _, m := range fullMethods {
		set[m] = true
	}
	return func(m string) Policy {
		if set[m] {
			return p
		}
		return Skip
	}
}

// WithKeep sets which handler error codes are final and kept for replay
// (default DefaultKeep). A code not kept releases the key, so the client's
// retry runs the handler again. A nil error (OK) is always kept.
func WithKeep(keep func(codes.Code) bool) ServerOption {
	return func(s *server) error {
		if keep == nil {
			return errors.New("nil keep function")
		}
		s.keep = keep
		return nil
	}
}

// WithResponseType gives the response message type of a method that is not
// in protoregistry.GlobalFiles (a hand-written grpc.ServiceDesc); replays
// are decoded into a new message of resp's type.
func WithResponseType(fullMethod string, resp proto.Message) ServerOption {
	return func(s *server) error {
		if resp == nil {
			return errors.New("nil response message for " + fullMethod)
		}
		s.types.Store(fullMethod, resp.ProtoReflect().Type())
		return nil
	}
}

// WithTransactions runs each call in transactional mode (idem.InTx): the
// engine's store must be a store.Transactor (the interceptor fails to build
// otherwise), and the handler finds the transaction in its context
// (sqlite.TxFrom, postgres.Querier, ...). WithTransactionsIfSupported does so
// only when the store has transactions, and runs lease mode otherwise.
func WithTransactions() ServerOption {
	return func(s *server) error {
		if !s.e.CanTransact() {
			return fmt.Errorf("WithTransactions needs a store.Transactor, and %T is not one (WithTransactionsIfSupported runs lease mode on it)", s.e.Store())
		}
		s.tx = true
		return nil
	}
}

// WithTransactionsIfSupported is WithTransactions when the engine's store
// is a store.Transactor, and lease mode otherwise.
func WithTransactionsIfSupported() ServerOption {
	return func(s *server) error {
		s.tx = s.e.CanTransact()
		return nil
	}
}

// WithMaxResponse sets the largest encoded response (or error status) kept
// for replay, in bytes (default idem.DefaultMaxResponse, 1 MiB; the rule is
// idem.KeepUpTo's). A larger one is still returned to
// the caller, and the key recorded as done without it: a retry gets
// AlreadyExists instead of a second run. In transactional mode the
// transaction is rolled back instead and the caller gets Internal (an
// effect must not commit without the answer its retry would replay).
func WithMaxResponse(n int) ServerOption {
	return func(s *server) error {
		if n <= 0 {
			return errors.New("non-positive max response")
		}
		s.maxResponse = n
		return nil
	}
}

// DefaultRetryDelay is the default WithRetryDelay.
const DefaultRetryDelay = time.Second

// WithRetryDelay sets the RetryInfo delay suggested to a call that finds its
// key in flight (default 1s): d, or the time left on the first call's lease
// when that is shorter. The lease's end alone would be a poor hint: the
// first call renews it while it runs, and usually ends long before.
func WithRetryDelay(d time.Duration) ServerOption {
	return func(s *server) error {
		if d <= 0 {
			return errors.New("non-positive retry delay")
		}
		s.retryDelay = d
		return nil
	}
}

// DefaultKeep keeps every handler error code except those that say the call
// may be retried as it is (Unavailable, ResourceExhausted, Aborted,
// DeadlineExceeded, Canceled) or that the server failed (Internal, Unknown,
// Unimplemented, DataLoss): the gRPC analogue of httpidem's "keep all but
// 5xx and 429".
func DefaultKeep(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded,
		codes.Canceled, codes.Internal, codes.Unknown, codes.Unimplemented, codes.DataLoss:
		return false
	}
	return true
}

type server struct {
	e      *idem.Engine
	scope  func(context.Context) ([]string, error)
	policy func(string) Policy
	keep   func(codes.Code) bool
	logger *slog.Logger // the engine's
	tx     bool
	run    []idem.RunOption
	types  sync.Map // full method → protoreflect.MessageType
	now    func() time.Time

	retryDelay  time.Duration
	maxResponse int
}

// UnaryServerInterceptor returns an interceptor that runs each unary call
// once per idempotency key on e, as the package documentation says. It
// fails with an error matching ErrInvalid for a nil engine or a nil option
// value.
func UnaryServerInterceptor(e *idem.Engine, opts ...ServerOption) (grpc.UnaryServerInterceptor, error) {
	if e == nil {
		return nil, fmt.Errorf("grpcidem: new server interceptor: nil engine (build one with idem.New): %w", ErrInvalid)
	}
	s := &server{e: e, policy: func(string) Policy { return Required }, keep: DefaultKeep, logger: e.Logger(), now: time.Now, retryDelay: DefaultRetryDelay, maxResponse: idem.DefaultMaxResponse}
	if err := invalid.Apply(s, opts); err != nil {
		return nil, fmt.Errorf("grpcidem: new server interceptor: %w", err)
	}
	if s.tx {
		s.run = []idem.RunOption{idem.InTx()}
	}
	return s.intercept, nil
}

// fingerprint identifies a call: its full method and the deterministic
// encoding of its request.
func fingerprint(fullMethod string, req proto.Message) (string, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(fullMethod))
	h.Write([]byte{0})
	h.Write(b)
	return "grpc1:" + hex.EncodeToString(h.Sum(nil)), nil
}

// responseType finds the method's response message type.
func (s *server) responseType(fullMethod string) (protoreflect.MessageType, error) {
	if t, ok := s.types.Load(fullMethod); ok {
		return t.(protoreflect.MessageType), nil
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("malformed method name %q", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("service %s is not registered (use WithResponseType): %w", svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, method)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, fmt.Errorf("response type %s is not registered: %w", md.Output().FullName(), err)
	}
	s.types.Store(fullMethod, mt)
	return mt, nil
}

// retryStatus is a status with a RetryInfo detail.
func retryStatus(c codes.Code, msg string, after time.Duration) error {
	st := status.New(c, msg)
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
		st = ds
	}
	return st.Err()
}

// verdict is what the engine settles for the handler's result.
type verdict struct {
	out      any
	err      error
	tooLarge bool
}

func (s *server) settle(v *verdict) idem.Verdict {
	if v.err != nil {
		st := status.Convert(v.err)
		if !s.keep(st.Code()) {
			return idem.Discard(st.Code().String())
		}
		b, err := encodeStatus(st)
		if err != nil {
			v.tooLarge = true
			return idem.KeepWithoutResponse("status not encodable: " + err.Error())
		}
		return s.keepBounded(v, b)
	}
	m, ok := v.out.(proto.Message)
	if !ok {
		v.tooLarge = true
		return idem.KeepWithoutResponse(fmt.Sprintf("response %T is not a protobuf message", v.out))
	}
	b, err := encodeMessage(m)
	if err != nil {
		v.tooLarge = true
		return idem.KeepWithoutResponse("response not encodable: " + err.Error())
	}
	return s.keepBounded(v, b)
}

func (s *server) keepBounded(v *verdict, b []byte) idem.Verdict {
	v.tooLarge = len(b) > s.maxResponse
	return idem.KeepUpTo(s.maxResponse, len(b), func() []byte { return b })
}

func (s *server) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	pol := s.policy(info.FullMethod)
	if pol == Skip {
		return handler(ctx, req)
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataKey)
	switch len(vals) {
	case 0:
		if pol == Optional {
			return handler(ctx, req)
		}
		return nil, status.Error(codes.InvalidArgument, "grpcidem: this method requires an idempotency key in the \"idempotency-key\" metadata")
	case 1:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "grpcidem: the call has %d idempotency-key values; send exactly one", len(vals))
	}
	key, err := keyer.ParseValue(vals[0])
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "grpcidem: "+strings.TrimPrefix(err.Error(), "keyer: "))
	}
	var scope []string
	if s.scope != nil {
		if scope, err = s.scope(ctx); err != nil {
			if errors.Is(err, ErrUnauthenticated) {
				return nil, status.Error(codes.Unauthenticated, "grpcidem: idempotency keys are scoped to the caller, and this call is not authenticated")
			}
			s.logger.ErrorContext(ctx, "grpcidem: scope function failed", "method", info.FullMethod, "err", err)
			return nil, status.Error(codes.Internal, "grpcidem: the server could not determine the scope of the idempotency key")
		}
	}
	skey, err := keyer.ScopedKey(key, scope...)
	if err != nil {
		s.logger.ErrorContext(ctx, "grpcidem: cannot scope key", "method", info.FullMethod, "err", err)
		return nil, status.Error(codes.Internal, "grpcidem: the server could not scope the idempotency key")
	}
	msg, ok := req.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "grpcidem: request %T is not a protobuf message", req)
	}
	fp, err := fingerprint(info.FullMethod, msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpcidem: cannot encode the request: %v", err)
	}
	// Found before the work runs: a replay must not fail for want of it.
	rt, err := s.responseType(info.FullMethod)
	if err != nil {
		s.logger.ErrorContext(ctx, "grpcidem: no response type", "method", info.FullMethod, "err", err)
		return nil, status.Errorf(codes.Internal, "grpcidem: %v", err)
	}

	var v verdict
	ran := false
	res, err := s.e.Run(ctx, skey, fp, func(wctx context.Context) idem.Verdict {
		ran = true
		v.out, v.err = handler(wctx, req)
		return s.settle(&v)
	}, s.run...)
	if err != nil {
		switch {
		case ran && !s.tx:
			// The work ran and its answer exists, but recording it failed
			// (logged by the engine): the client gets it; a retry after the
			// lease may run again.
			s.logger.WarnContext(ctx, "grpcidem: result not recorded", "method", info.FullMethod, "err", err)
			return v.out, v.err
		case ran:
			return nil, retryStatus(codes.Unavailable, "grpcidem: the call may not have been committed; retry with the same key", time.Second)
		case errors.Is(err, idem.ErrUnavailable):
			s.logger.ErrorContext(ctx, "grpcidem: store failed", "method", info.FullMethod, "err", err)
			return nil, retryStatus(codes.Unavailable, "grpcidem: the idempotency store is unavailable; the call was not run. Retry with the same key", time.Second)
		case ctx.Err() != nil:
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		s.logger.ErrorContext(ctx, "grpcidem: run failed", "method", info.FullMethod, "err", err)
		return nil, status.Error(codes.Internal, "grpcidem: the call could not be run")
	}
	switch res.Outcome {
	case store.Acquired:
		if v.tooLarge && s.tx && res.Settle == idem.SettleReleased {
			return nil, status.Error(codes.Internal, "grpcidem: the response could not be kept, so the transaction was rolled back")
		}
		return v.out, v.err
	case store.Completed:
		if res.NotKept {
			return nil, status.Error(codes.AlreadyExists, "grpcidem: the call with this key was done, but its response was not kept")
		}
		resp := rt.New().Interface()
		stErr, err := decode(res.Record.Response, resp)
		if err != nil {
			s.logger.ErrorContext(ctx, "grpcidem: stored response unreadable", "method", info.FullMethod, "err", err)
			return nil, status.Error(codes.Internal, "grpcidem: the stored response for this key cannot be read")
		}
		replayed := metadata.Pairs(ReplayedKey, "true")
		grpc.SetHeader(ctx, replayed)
		grpc.SetTrailer(ctx, replayed)
		if stErr != nil {
			return nil, stErr
		}
		return resp, nil
	case store.Mismatch:
		return nil, status.Error(codes.FailedPrecondition, "grpcidem: this idempotency key was already used with a different method or request; use a new key for a new request")
	default: // store.InProgress
		after := max(min(res.Record.LockedUntil.Sub(s.now()), s.retryDelay), 10*time.Millisecond)
		return nil, retryStatus(codes.Aborted, "grpcidem: a call with this idempotency key is still running; retry after the delay", after)
	}
}
