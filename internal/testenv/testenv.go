// Package testenv finds the database servers the module's own tests may use.
//
// Tests that need PostgreSQL, MySQL/MariaDB or a real Redis ask for its address here. When
// the variable is unset they are skipped, except under CI=true, where a
// missing server is a failure: CI must never pass by skipping.
package testenv

import (
	"os"
	"strings"
	"testing"
)

// PostgresURL returns IDEMKIT_POSTGRES_URL, or skips (fails under CI) when unset.
func PostgresURL(t testing.TB) string {
	t.Helper()
	return need(t, "IDEMKIT_POSTGRES_URL", "PostgreSQL")
}

// MySQLDSN returns IDEMKIT_MYSQL_DSN (a go-sql-driver/mysql DSN such as
// root@tcp(127.0.0.1:3306)/test), or skips (fails under CI) when unset.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return need(t, "IDEMKIT_MYSQL_DSN", "MySQL or MariaDB")
}

// RedisAddr returns IDEMKIT_REDIS_ADDR (host:port), or skips (fails under CI) when unset.
func RedisAddr(t testing.TB) string {
	t.Helper()
	return need(t, "IDEMKIT_REDIS_ADDR", "Redis")
}

// RedisClusterAddrs returns the comma-separated IDEMKIT_REDIS_CLUSTER_ADDRS,
// or skips (fails under CI) when unset.
func RedisClusterAddrs(t testing.TB) []string {
	t.Helper()
	return strings.Split(need(t, "IDEMKIT_REDIS_CLUSTER_ADDRS", "Redis Cluster"), ",")
}

// DynamoDBEndpoint returns IDEMKIT_DYNAMODB_ENDPOINT (the URL of a
// DynamoDB-compatible server such as http://127.0.0.1:8000), or skips (fails
// under CI) when unset.
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	return need(t, "IDEMKIT_DYNAMODB_ENDPOINT", "DynamoDB-compatible server")
}

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool {
	return os.Getenv("CI") == "true"
}

func need(t testing.TB, env, what string) string {
	t.Helper()
	v := os.Getenv(env)
	if v != "" {
		return v
	}
	if InCI() {
		t.Fatalf("%s is not set: CI=true requires a real %s (bash .ci/run starts one)", env, what)
	}
	t.Skipf("%s is not set; skipping the tests that need a real %s", env, what)
	return ""
}
