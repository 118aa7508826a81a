package chiidem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

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
	mw, err := httpidem.New(e, httpidem.WithScope(func(r *http.Request) ([]string, error) {
		return []string{r.Header.Get("X-User")}, nil // your authenticated user
	}))
	if err != nil {
		fmt.Println(err)
		return
	}

	charges := 0
	r := chi.NewRouter()
	r.With(mw).Post("/accounts/{id}/payments", func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"account":%q,"payment":%d}`, chi.URLParam(r, "id"), charges)
	})

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/accounts/acc-7/payments", strings.NewReader(`{"amount":1990}`))
		req.Header.Set("Idempotency-Key", `"9b2e4c1a"`)
		req.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body.String())
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201  {"account":"acc-7","payment":1}
	// 201 true {"account":"acc-7","payment":1}
	// charges: 1
}
