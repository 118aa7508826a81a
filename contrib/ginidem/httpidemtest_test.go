package ginidem_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit/contrib/ginidem"
	"github.com/idemkit/idemkit/internal/httpconformance"
)

// TestHTTPIdemTest runs httpidemtest through gin: a gin handler that binds
// the body, fails with c.JSON and answers through gin's writer, behind
// ginidem.Middleware, in lease mode on memory and transactional mode on
// SQLite (restarted between a request and its retry).
func TestHTTPIdemTest(t *testing.T) {
	httpconformance.Run(t, []httpconformance.Store{httpconformance.Memory, httpconformance.SQLite}, 0,
		func(p *httpconformance.Payments, mw func(http.Handler) http.Handler) http.Handler {
			r := gin.New()
			r.POST("/payments", ginidem.Middleware(mw), func(c *gin.Context) {
				var req struct {
					Amount int `json:"amount" binding:"required"`
				}
				if err := c.ShouldBindJSON(&req); err != nil {
					c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
					return
				}
				id, status := p.Create(c.Request.Context())
				if status != 0 {
					c.JSON(status, gin.H{"error": "failing on purpose"})
					return
				}
				httpconformance.Answer(c.Writer, id, req.Amount)
			})
			return r
		})
}
