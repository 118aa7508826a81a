package idem

import "strconv"

// verdictKind is what the work says about its effect.
type verdictKind uint8

const (
	keep verdictKind = iota + 1
	discard
	keepWithoutResponse
)

// Verdict is what the work says happened, and so how the engine settles the
// key: Keep (the effect happened; record the response), Discard (the effect
// did not happen; release the key so a retry runs the work), or
// KeepWithoutResponse (the effect happened but its response cannot be kept;
// record the key as done without it). The zero Verdict is Keep(nil).
type Verdict struct {
	kind     verdictKind
	response []byte
	reason   string
	status   int
}

// Keep says the effect happened and response is the answer to replay.
func Keep(response []byte) Verdict { return Verdict{kind: keep, response: response} }

// Discard says the effect did not happen (the work failed before any
// effect, or undid it): the key is released and a retry runs the work again.
// Never discard an effect that may have happened: an unknown outcome is not
// "did not happen".
func Discard(reason string) Verdict { return Verdict{kind: discard, reason: reason} }

// KeepWithoutResponse says the effect happened but its response cannot be
// kept (too large): the key is completed without it, and a retry gets a
// replay with Result.NotKept set instead of a second run. In transactional
// mode the transaction is rolled back instead (nothing is recorded and no
// effect committed).
func KeepWithoutResponse(reason string) Verdict {
	return Verdict{kind: keepWithoutResponse, reason: reason}
}

// WithStatus attaches the surface's status (an HTTP status) to the verdict,
// for the events it causes.
func (v Verdict) WithStatus(status int) Verdict {
	v.status = status
	return v
}

func (v Verdict) kindOrKeep() verdictKind {
	if v.kind == 0 {
		return keep
	}
	return v.kind
}

// notKeptMarker is the response recorded for KeepWithoutResponse. Its first
// byte is 0, which starts no httpidem encoding (version 1), no JSON and no
// text a surface stores, so a replay can tell it apart.
var notKeptMarker = []byte("\x00idem:response-not-kept")

// isNotKept reports whether a recorded response is the not-kept marker.
func isNotKept(resp []byte) bool { return string(resp) == string(notKeptMarker) }

// KeepUpTo is the one rule every surface uses to decide what is too large
// to keep: a result of size bytes up to limit is kept (Keep with the bytes
// response returns, called only then); a larger one is recorded as done
// without it (KeepWithoutResponse), so a retry is told the work was done
// and never runs it again. httpidem (WithMaxResponse), grpcidem
// (WithMaxResponse) and Do (WithMaxResult) all decide through it; a limit
// of 0 or less keeps nothing.
func KeepUpTo(limit, size int, response func() []byte) Verdict {
	if size > limit {
		return KeepWithoutResponse("response of " + strconv.Itoa(size) + " bytes is over the " + strconv.Itoa(limit) + "-byte limit")
	}
	return Keep(response())
}
