package httpidem_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

func Example() {
	st, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	charges := 0
	createPayment := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"amount":1990}`, charges)
	})
	e, err := idem.New(st)
	if err != nil {
		panic(err)
	}
	mw, err := httpidem.New(e,
		// Scope keys by the authenticated caller (here, a header for brevity).
		httpidem.WithScope(func(r *http.Request) ([]string, error) {
			return []string{r.Header.Get("X-User")}, nil
		}),
	)
	if err != nil {
		panic(err)
	}
	h := mw(createPayment)

	for range 3 {
		r := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":1990}`))
		r.Header.Set("Idempotency-Key", `"7c1f3a52-0e4b-4d0a-9a3e-5b2c8d1f6e90"`)
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Body)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), string(body))
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201  {"id":1,"amount":1990}
	// 201 true {"id":1,"amount":1990}
	// 201 true {"id":1,"amount":1990}
	// charges: 1
}

func Example_problems() {
	st, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	e, err := idem.New(st)
	if err != nil {
		panic(err)
	}
	mw, err := httpidem.New(e)
	if err != nil {
		panic(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))

	r := httptest.NewRequest("POST", "/payments", strings.NewReader(`{"amount":1990}`))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Print(w.Body.String())
	// Output:
	// 400 application/problem+json
	// {"type":"about:blank","title":"Bad Request","status":400,"detail":"This request requires an Idempotency-Key header.","code":"idempotency-key-missing"}
}
