package grpcidem

import (
	"errors"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A stored result is a version byte, a kind byte, then the payload: the
// response message's protobuf encoding, or a google.rpc.Status.
const (
	codecVersion = 'g'
	kindMessage  = 1
	kindStatus   = 2
)

var errStored = errors.New("grpcidem: stored response unreadable")

func encodeMessage(m proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte{codecVersion, kindMessage}, b...), nil
}

func encodeStatus(st *status.Status) ([]byte, error) {
	b, err := proto.Marshal(st.Proto())
	if err != nil {
		return nil, err
	}
	return append([]byte{codecVersion, kindStatus}, b...), nil
}

// decode fills resp (a new message of the method's response type) or
// returns the stored status as an error.
func decode(b []byte, resp proto.Message) (error, error) {
	if len(b) < 2 || b[0] != codecVersion {
		return nil, errStored
	}
	switch b[1] {
	case kindMessage:
		if err := proto.Unmarshal(b[2:], resp); err != nil {
			return nil, fmt.Errorf("%w: %w", errStored, err)
		}
		return nil, nil
	case kindStatus:
		var sp spb.Status
		if err := proto.Unmarshal(b[2:], &sp); err != nil {
			return nil, fmt.Errorf("%w: %w", errStored, err)
		}
		return status.ErrorProto(&sp), nil
	}
	return nil, errStored
}
