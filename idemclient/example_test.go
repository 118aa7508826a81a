package idemclient_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idemclient"
	"github.com/idemkit/idemkit/store/memory"
)

func Example() {
	st, err := memory.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	var charges atomic.Int32
	var drops atomic.Int32
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := charges.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, n)
	})
	// The first answer is lost on its way back (as a proxy timing out
	// would): the client sees 502 and retries with the same key.
	lossy := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if drops.Add(1) == 1 {
				next.ServeHTTP(httptest.NewRecorder(), r)
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	e, err := idem.New(st)
	if err != nil {
		fmt.Println(err)
		return
	}
	mw, err := httpidem.New(e)
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(lossy(mw(pay)))
	defer srv.Close()

	client, err := idemclient.NewClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Post(srv.URL+"/payments", "application/json", strings.NewReader(`{"amount":1990}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "replayed:", idemclient.Replayed(resp), "charges:", charges.Load())
	// Output:
	// 201 {"id":1} replayed: true charges: 1
}

// A key taken from your own data makes a whole call, retried by you, one
// operation for the server.
func ExampleWithKey() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("server got key", r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()

	ctx := idemclient.WithKey(context.Background(), "order-1234")
	client, err := idemclient.NewClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{"amount":1990}`))
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("sent with", idemclient.KeyOf(resp))
	// Output:
	// server got key "order-1234"
	// sent with order-1234
}
