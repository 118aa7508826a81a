// Package fphook lets httpidem fingerprint a request into a buffer it owns.
//
// keyer.Fingerprinter.Fingerprint reads the body into a new buffer and
// leaves a reader over it in r.Body, so the handler can read the body
// afterwards; the buffer lives as long as the request. httpidem's lease
// mode knows when the handler is done with the body (the run ended, and
// the handler's reader was cut off), so it reads every body into a pooled
// buffer instead, and a replay, the common duplicate, allocates nothing
// for the body. keyer sets Fingerprint when it is initialised; the
// function is not part of keyer's API.
package fphook

import "net/http"

// Fingerprint is set by package keyer: f is a *keyer.Fingerprinter, and
// the result is f.Fingerprint(r) but for the body, which is read into
// buf's array (a new one when buf is too small) and returned, with r.Body
// left drained. On an error, body is the buffer it used, emptied.
var Fingerprint func(f any, r *http.Request, buf []byte) (fp string, body []byte, err error)
