package echoidem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idemkit/contrib/echoidem"
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
	eng, err := idem.New(st)
	if err != nil {
		fmt.Println(err)
		return
	}
	mw, err := httpidem.New(eng, httpidem.WithScope(func(r *http.Request) ([]string, error) {
		return []string{r.Header.Get("X-User")}, nil // your authenticated user
	}))
	if err != nil {
		fmt.Println(err)
		return
	}

	charges := 0
	e := echo.New()
	e.POST("/payments", func(c echo.Context) error {
		charges++
		return c.JSON(http.StatusCreated, map[string]int{"id": charges})
	}, echoidem.Middleware(mw))

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1990}`))
		req.Header.Set("Idempotency-Key", `"9b2e4c1a"`)
		req.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), strings.TrimSpace(w.Body.String()))
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201  {"id":1}
	// 201 true {"id":1}
	// charges: 1
}
