package httpidem_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/url"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

// BenchmarkPaired measures the middleware against rawMiddleware, a minimal
// hand-written idempotency middleware on the same memory store (read the
// key header, SHA-256 of method, path and body, claim with a new token, run
// the handler into a buffer, Complete, write the response out; no
// heartbeat, no retries, no header policy), in one run: rounds of
// pairedRound requests per worker, the middleware's round and raw's one
// after the other (the order swapping every round), so both meet the same
// load from the rest of the machine. It reports store/raw, the
// middleware's throughput relative to raw's, and each side's allocations
// and allocated bytes per request (store-allocs/op, raw-allocs/op,
// store-B/op, raw-B/op). First: every request has a
// new key; Replay: every request replays one of 1024 completed keys.
// cmd/idembench runs it as the "http" backend:
//
//	go test -run '^$' -bench '^BenchmarkPaired$' -benchtime 100000x -count 5 ./httpidem/
func BenchmarkPaired(b *testing.B) {
	for _, c := range []string{"First", "Replay"} {
		for _, workers := range []int{1, 16} {
			b.Run(c+"/workers="+strconv.Itoa(workers), func(b *testing.B) {
				s := mustMemory(b, memory.WithSweepInterval(0))
				b.Cleanup(func() { s.Close() })
				sides := [2]http.Handler{mustNew(b, s)(benchHandler), &rawMiddleware{s: s, lease: idem.DefaultLease, retention: idem.DefaultRetention, next: benchHandler}}
				var key func(side, w, i int) string
				switch c {
				case "First":
					// Every request a new key, made before the timer starts.
					keys := [2][]string{make([]string, b.N+workers*pairedRound), make([]string, b.N+workers*pairedRound)}
					for side := range keys {
						for i := range keys[side] {
							keys[side][i] = "k" + strconv.Itoa(side) + "-" + strconv.Itoa(i)
						}
					}
					key = func(side, w, i int) string { return keys[side][i*workers+w] }
				case "Replay":
					keys := make([]string, 1024)
					for i := range keys {
						keys[i] = "replay-" + strconv.Itoa(i)
						for _, h := range sides {
							runOne(h, newBenchReq(), &discardWriter{h: http.Header{}}, keys[i])
						}
					}
					key = func(_, w, i int) string { return keys[(w<<8+i)&1023] }
				}
				runPairedHTTP(b, workers, sides, key)
			})
		}
	}
}

// benchReq is one worker's request, reused for every request it sends.
type benchReq struct {
	r    *http.Request
	body *bytes.Reader
}

func newBenchReq() *benchReq {
	body := bytes.NewReader(benchBody)
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: "/payments"},
		Header: http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {""}},
		Body:   io.NopCloser(body), ContentLength: int64(len(benchBody)),
	}
	return &benchReq{r: r, body: body}
}

var errBenchStatus = errors.New("unexpected status")

func runOne(h http.Handler, q *benchReq, w *discardWriter, key string) error {
	q.body.Reset(benchBody)
	q.r.Body = io.NopCloser(q.body)
	q.r.Header["Idempotency-Key"][0] = key
	clear(w.h)
	w.code = 0
	h.ServeHTTP(w, q.r)
	if w.code != http.StatusCreated {
		return errBenchStatus
	}
	return nil
}

const pairedRound = 500 // requests per worker per round

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}

// heapAllocs returns how many heap objects and bytes the process has
// allocated so far.
func heapAllocs() (objects, bytes uint64) {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64(), allocSample[1].Value.Uint64()
}

// runPairedHTTP runs b.N requests on each side over workers goroutines, in
// rounds alternating the two sides, and reports store/raw = raw's wall time
// ÷ the middleware's, and each side's heap allocations per request.
func runPairedHTTP(b *testing.B, workers int, sides [2]http.Handler, key func(side, w, i int) string) {
	b.Helper()
	reqs := make([][2]*benchReq, workers)
	ws := make([][2]*discardWriter, workers)
	for w := range workers {
		for side := range 2 {
			reqs[w][side] = newBenchReq()
			ws[w][side] = &discardWriter{h: http.Header{}}
		}
	}
	var took [2]time.Duration
	var allocs, allocBytes [2]uint64
	var ops [2]int
	phase := func(side, base, n int) error {
		var wg sync.WaitGroup
		errs := make([]error, workers)
		a0, b0 := heapAllocs()
		start := time.Now()
		for w := range workers {
			wg.Go(func() {
				for i := base; i < base+n; i++ {
					if err := runOne(sides[side], reqs[w][side], ws[w][side], key(side, w, i)); err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		took[side] += time.Since(start)
		a1, b1 := heapAllocs()
		allocs[side] += a1 - a0
		allocBytes[side] += b1 - b0
		ops[side] += n * workers
		return errors.Join(errs...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for r, done := 0, 0; done < b.N; r, done = r+1, done+pairedRound*workers {
		n := max(min(pairedRound*workers, b.N-done)/workers, 1)
		base := r * pairedRound
		first := r % 2
		if err := phase(first, base, n); err != nil {
			b.Fatal(err)
		}
		if err := phase(1-first, base, n); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(ops[0]), "store-ns/op")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(ops[1]), "raw-ns/op")
	b.ReportMetric(float64(allocs[0])/float64(ops[0]), "store-allocs/op")
	b.ReportMetric(float64(allocs[1])/float64(ops[1]), "raw-allocs/op")
	b.ReportMetric(float64(allocBytes[0])/float64(ops[0]), "store-B/op")
	b.ReportMetric(float64(allocBytes[1])/float64(ops[1]), "raw-B/op")
	b.ReportMetric((float64(took[1])/float64(ops[1]))/(float64(took[0])/float64(ops[0])), "store/raw")
}

// rawMiddleware is the floor the middleware is measured against: what a
// minimal hand-written idempotency middleware does on the same store, and
// no more.
type rawMiddleware struct {
	s                store.Store
	lease, retention time.Duration
	next             http.Handler
}

func (m *rawMiddleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h := sha256.New()
	io.WriteString(h, r.Method)
	io.WriteString(h, r.URL.Path)
	h.Write(body)
	fp := hex.EncodeToString(h.Sum(nil))
	tok := store.NewToken()
	ctx := r.Context()
	c, err := m.s.Claim(ctx, key, fp, tok, m.lease)
	if err != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	switch c.Outcome {
	case store.Completed:
		status, ctype, b := rawDecode(c.Record.Response)
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(status)
		w.Write(b)
		return
	case store.Acquired:
	default:
		http.Error(w, "conflict", http.StatusConflict)
		return
	}
	rec := &rawRecorder{h: http.Header{}}
	m.next.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	ctype := rec.h.Get("Content-Type")
	enc := make([]byte, 0, 4+len(ctype)+rec.body.Len())
	enc = binary.BigEndian.AppendUint16(enc, uint16(rec.status))
	enc = binary.BigEndian.AppendUint16(enc, uint16(len(ctype)))
	enc = append(enc, ctype...)
	enc = append(enc, rec.body.Bytes()...)
	if err := m.s.Complete(ctx, key, tok, enc, m.retention); err != nil {
		http.Error(w, "store", http.StatusInternalServerError)
		return
	}
	for k, vs := range rec.h {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.status)
	w.Write(rec.body.Bytes())
}

func rawDecode(b []byte) (status int, ctype string, body []byte) {
	status = int(binary.BigEndian.Uint16(b))
	n := int(binary.BigEndian.Uint16(b[2:]))
	return status, string(b[4 : 4+n]), b[4+n:]
}

type rawRecorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *rawRecorder) Header() http.Header { return r.h }

func (r *rawRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *rawRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
