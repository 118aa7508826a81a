package grpcidem_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/idemkit/idemkit/contrib/grpcidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

const payMethod = "/example.Payments/Pay"

// payService is a hand-written service description (generated code would
// provide it), with google.protobuf.StringValue in and out.
func payService(pay func(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "example.Payments",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Pay", Handler: func(_ any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{FullMethod: payMethod}, func(ctx context.Context, req any) (any, error) {
				return pay(ctx, req.(*wrapperspb.StringValue))
			})
		}}},
	}
}

func Example() {
	st, err := memory.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		fmt.Println(err)
		return
	}
	si, err := grpcidem.UnaryServerInterceptor(e,
		// Scope keys by the caller (your authentication's identity).
		grpcidem.WithScope(func(ctx context.Context) ([]string, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			return md.Get("x-user"), nil
		}),
		// Generated services are found in protoregistry; this one is not.
		grpcidem.WithResponseType(payMethod, &wrapperspb.StringValue{}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	charges := 0
	srv := grpc.NewServer(grpc.UnaryInterceptor(si))
	srv.RegisterService(payService(func(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
		charges++
		return wrapperspb.String(fmt.Sprintf("payment %d for %s", charges, in.GetValue())), nil
	}), nil)
	lis := bufconn.Listen(1 << 16)
	go srv.Serve(lis)
	defer srv.Stop()

	ci, err := grpcidem.UnaryClientInterceptor()
	if err != nil {
		fmt.Println(err)
		return
	}
	conn, err := grpc.NewClient("passthrough:///pay",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(ci),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	// One logical call, sent twice with its key (as a retry would be).
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user", "alice")
	ctx = grpcidem.WithKey(ctx, "order-1234")
	for range 2 {
		var replayed bool
		out := new(wrapperspb.StringValue)
		if err := conn.Invoke(ctx, payMethod, wrapperspb.String("19.90"), out, grpcidem.Replayed(&replayed)); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%q replayed=%v\n", out.GetValue(), replayed)
	}
	fmt.Println("charges:", charges)
	// Output:
	// "payment 1 for 19.90" replayed=false
	// "payment 1 for 19.90" replayed=true
	// charges: 1
}
