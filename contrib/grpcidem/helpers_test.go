package grpcidem

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/idemkit/idemkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The test service, without protoc: idemkit.test.Payments with Pay and
// Refund, both google.protobuf.Struct → google.protobuf.Struct. Its file
// descriptor is registered in protoregistry.GlobalFiles, as generated code
// would do; idemkit.test.Unregistered is not.
const (
	payMethod    = "/idemkit.test.Payments/Pay"
	refundMethod = "/idemkit.test.Payments/Refund"
	unregMethod  = "/idemkit.test.Unregistered/Pay"
)

func init() {
	method := func(name string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name),
			InputType: proto.String(".google.protobuf.Struct"), OutputType: proto.String(".google.protobuf.Struct")}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("idemkit/test/payments.proto"),
		Package:    proto.String("idemkit.test"),
		Dependency: []string{"google/protobuf/struct.proto"},
		Syntax:     proto.String("proto3"),
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Payments"), Method: []*descriptorpb.MethodDescriptorProto{method("Pay"), method("Refund")},
		}},
	}
	_ = structpb.Struct{} // struct.proto is registered by this import
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		panic(err)
	}
}

// payments is the service: it counts the calls its handler runs.
type payments struct {
	calls atomic.Int32
	// handle, when set, answers instead of the default.
	handle func(ctx context.Context, method string, req *structpb.Struct) (*structpb.Struct, error)
}

func (p *payments) serve(method string) func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	return func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
		n := p.calls.Add(1)
		if p.handle != nil {
			return p.handle(ctx, method, req)
		}
		return structpb.NewStruct(map[string]any{"id": float64(n), "amount": req.Fields["amount"].GetNumberValue()})
	}
}

func methodDesc(p *payments, full, name string) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(structpb.Struct)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := p.serve(full)
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: full}, func(ctx context.Context, req any) (any, error) {
			return h(ctx, req.(*structpb.Struct))
		})
	}}
}

func register(s *grpc.Server, p *payments) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "idemkit.test.Payments",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{methodDesc(p, payMethod, "Pay"), methodDesc(p, refundMethod, "Refund")},
	}, p)
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "idemkit.test.Unregistered",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{methodDesc(p, unregMethod, "Pay")},
	}, p)
}

// transport is how a test reaches its server.
type transport struct {
	name   string
	listen func(t *testing.T) (net.Listener, func(ctx context.Context, addr string) (net.Conn, error), string)
}

var transports = []transport{
	{"bufconn", func(t *testing.T) (net.Listener, func(context.Context, string) (net.Conn, error), string) {
		lis := bufconn.Listen(1 << 20)
		return lis, func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }, "passthrough:///bufnet"
	}},
	{"tcp", func(t *testing.T) (net.Listener, func(context.Context, string) (net.Conn, error), string) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		return lis, nil, lis.Addr().String()
	}},
}

// trackingListener remembers its connections, so a test can cut them.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) cutAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// env is a running server and a client connection to it.
type env struct {
	conn *grpc.ClientConn
	p    *payments
	lis  *trackingListener
	addr string
}

// start serves the test service with the interceptors and dials it; cops
// are extra dial options (the client interceptor).
func start(t *testing.T, tr transport, p *payments, sis []grpc.UnaryServerInterceptor, dops ...grpc.DialOption) *env {
	t.Helper()
	lis, dial, target := tr.listen(t)
	tl := &trackingListener{Listener: lis}
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(sis...))
	register(s, p)
	done := make(chan error, 1)
	go func() { done <- s.Serve(tl) }()
	dops = append(dops, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if dial != nil {
		dops = append(dops, grpc.WithContextDialer(dial))
	}
	conn, err := grpc.NewClient(target, dops...)
	require.NoError(t, err)
	t.Cleanup(func() {
		conn.Close()
		s.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return &env{conn: conn, p: p, lis: tl, addr: lis.Addr().String()}
}
