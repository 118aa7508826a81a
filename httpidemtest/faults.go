package httpidemtest

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// holdFor is how long the in-flight rules hold the first request after its
// duplicate was sent: a duplicate that has not answered by then is waiting.
const holdFor = time.Second

// duplicate is what the in-flight rules saw: the first request, the
// duplicate sent while it ran, and whether the duplicate answered while the
// first was still held.
type duplicate struct {
	first, dup Exchange
	early      bool // the duplicate answered while the first was held in the handler
	reached    bool // the duplicate reached the held effect
}

// inflight sends a request and, while it runs, a duplicate. ok is false when
// the rule failed or was skipped.
func (c *checker) inflight() (d duplicate, ok bool) {
	key, body := newKey(), c.t.Body()
	firstc, dupc := make(chan Exchange, 1), make(chan Exchange, 1)
	send := func(note string, to chan<- Exchange) {
		go func() { to <- c.send(req{note: note, keys: c.t.keyed(key), body: body}) }()
	}
	if c.t.Hold == nil {
		send("first", firstc)
		wait := time.NewTimer(c.t.InFlightAfter)
		defer wait.Stop()
		select {
		case f := <-firstc:
			c.skipf("the first request answered in %v, before its duplicate was due (InFlightAfter %v): give the endpoint latency or Target.Hold to check duplicates in flight",
				f.Elapsed.Round(time.Millisecond), c.t.InFlightAfter)
			return d, false
		case <-wait.C:
		}
		send("duplicate in flight", dupc)
		d.first, d.dup = <-firstc, <-dupc
		if d.first.Err == "" && d.dup.Err == "" && d.first.Status == http.StatusConflict && d.dup.Status < 400 {
			// The duplicate reached the server first (the first request
			// waited for a connection, say): judge them the other way round.
			d.first, d.dup = d.dup, d.first
		}
	} else {
		entered, release := c.t.Hold()
		released := sync.OnceFunc(release)
		defer released()
		send("first", firstc)
		timeout := time.NewTimer(c.t.RequestTimeout)
		defer timeout.Stop()
		select {
		case <-entered:
		case f := <-firstc:
			c.failf("the first request answered %d without reaching the held effect: Target.Hold does not hold it", f.Status)
			return d, false
		case <-timeout.C:
			c.failf("the first request did not reach the held effect within %v", c.t.RequestTimeout)
			return d, false
		}
		send("duplicate in flight", dupc)
		hold := time.NewTimer(holdFor)
		defer hold.Stop()
		select {
		case d.dup = <-dupc:
			d.early = true
		case <-entered:
			d.reached = true
		case <-hold.C: // the duplicate waits
		}
		released()
		d.first = <-firstc
		if !d.early {
			d.dup = <-dupc
		}
	}
	if !c.answered(d.first) || !c.answered(d.dup) {
		return d, false
	}
	if d.first.Status >= 400 {
		c.failf("first: a fresh key with a valid body answered %d; the suite needs an endpoint that serves Body", d.first.Status)
		return d, false
	}
	return d, true
}

func inflightConflictOrWait(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	d, ok := c.inflight()
	if !ok {
		return
	}
	if d.reached {
		c.failf("the duplicate reached the effect while the first request was still running")
	}
	switch {
	case d.dup.Status == http.StatusConflict:
	case d.early:
		c.failf("the duplicate answered %d while the first request was still running: want 409, or a wait and then the first answer", d.dup.Status)
	default:
		c.mustReplay(d.first, d.dup)
	}
	c.effects(before, 1, "a request and its duplicate in flight")
}

func inflightRetryAfter(c *checker) {
	d, ok := c.inflight()
	if !ok {
		return
	}
	if d.dup.Status != http.StatusConflict {
		c.skipf("the duplicate in flight answered %d, not 409 (the endpoint waits): no Retry-After to judge", d.dup.Status)
		return
	}
	ra := d.dup.Header.Get("Retry-After")
	if ra == "" {
		c.failf("the 409 for a duplicate in flight has no Retry-After")
		return
	}
	var wait time.Duration
	if s, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && s >= 0 {
		wait = time.Duration(s) * time.Second
	} else if at, err := http.ParseTime(ra); err == nil {
		wait = time.Until(at)
	} else {
		c.failf("the 409's Retry-After %q is neither seconds nor an HTTP date", ra)
		return
	}
	if wait > c.t.MaxRetryAfter {
		c.failf("the 409's Retry-After asks for %v; a duplicate in flight should retry soon (at most %v): a Retry-After as long as the lease delays every client whose reply was lost",
			wait, c.t.MaxRetryAfter)
	}
}

func notKept(c *checker, status int) {
	before, ok := c.count()
	if !ok {
		return
	}
	undo := sync.OnceFunc(c.t.Fail(status))
	defer undo()
	key, body := newKey(), c.t.Body()
	e := c.send(req{note: "while failing with " + strconv.Itoa(status), keys: c.t.keyed(key), body: body})
	if !c.answered(e) {
		return
	}
	if e.Status != status {
		c.failf("Target.Fail(%d) did not make the endpoint answer %d (it answered %d)", status, status, e.Status)
		return
	}
	undo()
	retry := c.retry(req{note: "retry after the failure", keys: c.t.keyed(key), body: body})
	if !c.answered(retry) {
		return
	}
	switch {
	case retry.Status == status || c.replayed(retry):
		c.failf("the retry got the %d again (replayed: %v): a %d must not be kept, the retry must run the effect", status, c.replayed(retry), status)
	case retry.Status >= 400:
		c.failf("the retry after the %d answered %d; it must run the effect", status, retry.Status)
	}
	c.effects(before, 1, "a failed request and its retry")
}

func burst(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	key, body := newKey(), c.t.Body()
	n := c.t.Concurrency
	got := make([]Exchange, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			got[i] = c.send(req{note: "burst " + strconv.Itoa(i+1) + "/" + strconv.Itoa(n), keys: c.t.keyed(key), body: body})
		})
	}
	close(start)
	wg.Wait()
	ref := -1 // the answer the others must equal: the original if one shows, else the first served
	for i, e := range got {
		if !c.answered(e) || e.Status == http.StatusConflict {
			continue
		}
		if ref < 0 || (!c.replayed(e) && c.replayed(got[ref])) {
			ref = i
		}
	}
	if ref < 0 {
		c.failf("none of the %d identical requests was served (each got 409 or no answer)", n)
	} else {
		for i, e := range got {
			if i == ref || e.Err != "" || e.Status == http.StatusConflict {
				continue
			}
			if d := c.sameAnswer(got[ref], e, false); len(d) > 0 {
				c.failf("%s differs from %s: %s", e.Note, got[ref].Note, strings.Join(d, "; "))
			}
		}
	}
	c.effects(before, 1, strconv.Itoa(n)+" identical requests at once")
}

func lostReply(c *checker) {
	if c.t.base.Scheme != "http" {
		c.skipf("the lost-reply proxy reads the answer, so it needs an http:// target")
		return
	}
	p, err := newDropProxy(c.t.base.Host)
	if err != nil {
		c.failf("cannot start the proxy: %v", err)
		return
	}
	defer p.close()
	before, ok := c.count()
	if !ok {
		return
	}
	key, body := newKey(), c.t.Body()
	e := c.sendVia(p.client(c.t.RequestTimeout), c.t.base.String(), req{note: "through a proxy that drops the answer", keys: c.t.keyed(key), body: body})
	if e.Err == "" {
		c.failf("the proxy passed an answer on (%d): cannot lose it", e.Status)
		return
	}
	lost, err := p.dropped()
	if err != nil {
		c.failf("the server sent no answer through the proxy: %v", err)
		return
	}
	lost.Method, lost.URL, lost.Key, lost.RequestBody = e.Method, e.URL, e.Key, e.RequestBody
	c.mu.Lock()
	c.res.Exchanges = append(c.res.Exchanges, lost)
	c.mu.Unlock()
	if lost.Status >= 400 {
		c.failf("the lost answer was %d; the suite needs an endpoint that serves Body", lost.Status)
		return
	}
	retry := c.retry(req{note: "retry after the lost answer", keys: c.t.keyed(key), body: body})
	c.mustReplay(lost, retry)
	c.effects(before, 1, "a request whose answer was lost, and its retry")
}

func restart(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	key, body := newKey(), c.t.Body()
	first, ok := c.first(key, body, nil)
	if !ok {
		return
	}
	if err := c.t.Restart(c.ctx); err != nil {
		c.failf("Target.Restart: %v", err)
		return
	}
	retry := c.retry(req{note: "retry after the restart", keys: c.t.keyed(key), body: body})
	c.mustReplay(first, retry)
	c.effects(before, 1, "a request and its retry after a restart")
}

// padded returns Body grown to n bytes, or fails the rule.
func (c *checker) padded(n int) ([]byte, bool) {
	b, err := c.t.Pad(c.t.Body(), n)
	switch {
	case err != nil:
		c.failf("cannot make a body of %d bytes: %v", n, err)
		return nil, false
	case len(b) != n:
		c.failf("Target.Pad returned %d bytes, asked for %d", len(b), n)
		return nil, false
	}
	return b, true
}

func bodyAtLimit(c *checker) {
	body, ok := c.padded(c.t.MaxBody)
	if !ok {
		return
	}
	before, ok := c.count()
	if !ok {
		return
	}
	key := newKey()
	first := c.send(req{note: "body of MaxBody bytes", keys: c.t.keyed(key), body: body})
	if !c.answered(first) {
		return
	}
	if first.Status >= 400 {
		c.failf("a body of exactly MaxBody (%d) bytes answered %d; it must be served", c.t.MaxBody, first.Status)
		return
	}
	retry := c.retry(req{note: "retry", keys: c.t.keyed(key), body: body})
	c.mustReplay(first, retry)
	c.effects(before, 1, "a body at the limit and its retry")
}

func bodyOverLimit(c *checker) {
	body, ok := c.padded(c.t.MaxBody + 1)
	if !ok {
		return
	}
	before, ok := c.count()
	if !ok {
		return
	}
	e := c.send(req{note: "body of MaxBody+1 bytes", keys: c.t.keyed(newKey()), body: body})
	if c.answered(e) && e.Status != http.StatusRequestEntityTooLarge {
		c.failf("a body of MaxBody+1 (%d) bytes answered %d, want 413", c.t.MaxBody+1, e.Status)
	}
	c.effects(before, 0, "a body over the limit")
}

func scopeSeparate(c *checker) {
	before, ok := c.count()
	if !ok {
		return
	}
	key, body := newKey(), c.t.Body()
	a, ok := c.first(key, body, c.t.Scopes[0])
	if !ok {
		return
	}
	b := c.send(req{note: "same key, second scope", keys: c.t.keyed(key), body: body, scope: c.t.Scopes[1]})
	if !c.answered(b) {
		return
	}
	switch {
	case c.replayed(b):
		c.failf("the second scope got a replay: one caller's key replayed another caller's answer")
	case b.Status >= 400:
		c.failf("the same key from the second scope answered %d; it is a new request there", b.Status)
	}
	if !c.effects(before, 2, "the same key from two scopes") {
		return
	}
	retry := c.retry(req{note: "retry, first scope", keys: c.t.keyed(key), body: body, scope: c.t.Scopes[0]})
	c.mustReplay(a, retry)
}
