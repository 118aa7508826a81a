package linearize

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/store"
)

// String describes c as the report prints it: the call and its arguments.
func (c call) String(key string) string {
	switch c.kind {
	case claimCall:
		return fmt.Sprintf("Claim(%q, %q, %s)", key, c.fp, c.tok)
	case completeCall:
		return fmt.Sprintf("Complete(%q, %s, %q)", key, c.tok, c.resp)
	case releaseCall:
		return fmt.Sprintf("Release(%q, %s)", key, c.tok)
	case renewCall:
		return fmt.Sprintf("Renew(%q, %s)", key, c.tok)
	}
	return fmt.Sprintf("Get(%q)", key)
}

// result describes what c's caller saw.
func (c call) result() string {
	if !c.known() {
		return "no outcome seen: " + c.fault + " (it may have taken effect, or not)"
	}
	switch c.kind {
	case claimCall:
		return c.out.outcome.String() + " " + c.out.rec.String()
	case completeCall, renewCall:
		if c.out.leaseErr {
			return "store.ErrLeaseLost"
		}
		return "nil"
	case getCall:
		if c.out.notFound {
			return "store.ErrNotFound"
		}
		return c.out.rec.String()
	}
	return "nil"
}

func (r rec) String() string {
	if r.status == 0 {
		return "{absent}"
	}
	s := "{" + r.status.String() + " token=" + string(r.tok) + " fingerprint=" + strconv.Quote(r.fp)
	if r.status == store.StatusCompleted || r.resp != "" {
		s += " response=" + strconv.Quote(r.resp)
	}
	return s + "}"
}

func ms(ns int64) string {
	return strconv.FormatFloat(float64(ns)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

// describe is the failure's report: the history of one key with no order
// the contract allows, one call a line, in the order they began.
func describe(key string, h []call, keys int, seed uint64, round int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "linearize: the store is not linearizable: on key %q, no order of these %d calls agrees with the contract "+
		"(each call takes effect once, at one instant between its call and its return; one whose outcome was not seen, at any instant after its call or never). "+
		"Shortest history found, from round %d, %d key(s) failing; STORETEST_SEED=%d replays the requests, not their timing.\n",
		key, len(h), round, keys, seed)
	b.WriteString("      client  called     returned   call = result\n")
	for i, c := range h {
		end := "—"
		if c.known() {
			end = ms(c.end)
		}
		fmt.Fprintf(&b, "  %2d. c%-5d  %-9s  %-9s  %s = %s\n", i+1, c.client, ms(c.begin), end, c.String(key), c.result())
	}
	b.WriteString("Tokens are cN.J: client N's request J. A caller that saw no outcome retried with the same token; a retried Complete sends \" #2\" or \" #3\" after the response, and the first response must stay.")
	return b.String()
}
