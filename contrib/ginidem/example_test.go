package ginidem_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit/contrib/ginidem"
	"github.com/idemkit/idemkit/httpidem"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store/memory"
)

func Example() {
	gin.SetMode(gin.ReleaseMode)
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
	r := gin.New()
	r.POST("/payments", ginidem.Middleware(mw), func(c *gin.Context) {
		charges++
		c.JSON(http.StatusCreated, gin.H{"id": charges})
	})

	for range 2 {
		req := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{"amount":1990}`))
		req.Header.Set("Idempotency-Key", `"9b2e4c1a"`)
		req.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("Idempotent-Replayed"), w.Body.String())
	}
	fmt.Println("charges:", charges)
	// Output:
	// 201  {"id":1}
	// 201 true {"id":1}
	// charges: 1
}
