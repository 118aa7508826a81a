package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestModule runs the check on the module as it is.
func TestModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list on the whole module")
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", Module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, line := range Check(pkgs) {
		t.Error(line)
	}
}

// TestCheckFindsViolations feeds the check one package for each rule
// broken, and one of each kind that keeps the rules.
func TestCheckFindsViolations(t *testing.T) {
	m := func(r string) string { return Module + "/" + r }
	pkgs := []Package{
		// Good.
		{ImportPath: m("store"), Imports: []string{"context", "net/url"}},
		{ImportPath: m("store/postgres"), Imports: []string{m("store"), "github.com/jackc/pgx/v5/pgxpool"}, XTestImports: []string{m("internal/testenv"), m("storetest")}},
		{ImportPath: m("httpidem"), Imports: []string{m("store"), m("keyer"), m("idem")}},
		{ImportPath: m("examples/payments"), Imports: []string{m("store/sqlite"), m("httpidem")}, TestImports: []string{m("internal/testenv")}},
		{ImportPath: m("cmd/idemload"), Imports: []string{m("internal/loadtest")}},
		{ImportPath: m("httpidemtest"), Imports: []string{m("keyer"), "net/http/httptest", "testing"}, XTestImports: []string{m("internal/brokenidem")}},
		{ImportPath: m("cmd/idemcheck"), Imports: []string{m("httpidemtest")}, TestImports: []string{m("internal/brokenidem")}},
		// Bad, one each.
		{ImportPath: m("store"), Imports: []string{m("store/memory")}},
		{ImportPath: m("keyer"), Imports: []string{"github.com/stretchr/testify/assert"}},
		{ImportPath: m("store/redis"), Imports: []string{m("store/sqlite")}},
		{ImportPath: m("store/redis"), Imports: []string{"github.com/jackc/pgx/v5"}},
		{ImportPath: m("store/memory"), XTestImports: []string{m("store/redis")}},
		{ImportPath: m("dedup"), Imports: []string{m("httpidem")}},
		{ImportPath: m("storetest"), Imports: []string{m("internal/testenv")}},
		{ImportPath: m("httpidem"), TestImports: []string{m("examples/payments")}},
		{ImportPath: m("cmd/idemload"), Imports: []string{m("internal/testenv")}},
		{ImportPath: m("newpkg"), Imports: []string{m("store")}},
		{ImportPath: m("contrib/otelidem"), Imports: []string{m("idem"), "go.opentelemetry.io/otel"}},    // good
		{ImportPath: m("contrib/otelidem/example"), Imports: []string{m("store/sqlite"), m("httpidem")}}, // good: an app
		{ImportPath: m("contrib/ginidem"), Imports: []string{m("store/sqlite")}},
		{ImportPath: m("purge"), Imports: []string{m("httpidem")}},
		{ImportPath: m("store/postgres"), Imports: []string{m("internal/coalesce")}}, // good: backend support
		{ImportPath: m("httpidem"), Imports: []string{m("internal/coalesce")}},
		{ImportPath: m("internal/coalesce"), Imports: []string{m("store")}},
		// The nested NATS backend: its SDK (jetstream too) is its driver, and only it.
		{ImportPath: m("store/nats"), Imports: []string{m("store"), "github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream"},
			XTestImports: []string{m("storetest"), m("internal/seedtest"), "github.com/stretchr/testify/require"}}, // good
		{ImportPath: m("store/nats"), Imports: []string{"github.com/redis/go-redis/v9"}},
		{ImportPath: m("store/nats"), Imports: []string{"github.com/nats-io/nats-server/v2/server"}},
		{ImportPath: m("store/nats"), XTestImports: []string{m("store/memory")}},
		{ImportPath: m("httpidemtest"), Imports: []string{m("httpidem")}},
		{ImportPath: m("httpidemtest"), Imports: []string{m("internal/brokenidem")}},
		// The DynamoDB backend, a nested module: its SDK is its driver.
		{ImportPath: m("store/dynamodb"), Imports: []string{m("store"), "github.com/aws/aws-sdk-go-v2/service/dynamodb", "github.com/aws/aws-sdk-go-v2/config", "github.com/aws/smithy-go"},
			XTestImports: []string{m("internal/testenv"), m("internal/seedtest"), m("storetest"), m("idem")}}, // good
		{ImportPath: m("store/dynamodb"), Imports: []string{"github.com/redis/go-redis/v9"}},
		{ImportPath: m("store/dynamodb"), Imports: []string{m("idem")}},
		{ImportPath: m("store/dynamodb"), XTestImports: []string{m("store/memory")}},
		{ImportPath: m("store/redis"), Imports: []string{"github.com/aws/aws-sdk-go-v2/service/dynamodb"}},
		{ImportPath: m("store/dynamodb"), Imports: []string{"github.com/aws/aws-sdk-go-v2-fork/service/dynamodb"}},
		{ImportPath: m("storetest/linearize"), Imports: []string{m("store")}, XTestImports: []string{m("storetest")}}, // good
		{ImportPath: m("storetest/linearize"), Imports: []string{m("idem")}},
		{ImportPath: m("keyer"), Imports: []string{m("internal/invalid")}},          // good: anyone
		{ImportPath: m("store/mysql"), Imports: []string{m("internal/sqltx")}},      // good: a database/sql backend
		{ImportPath: m("contrib/grpcidem"), Imports: []string{m("internal/retry")}}, // good: a client
		{ImportPath: m("internal/sqltx"), Imports: []string{m("internal/invalid")}}, // good
		{ImportPath: m("store/redis"), Imports: []string{m("internal/sqltx")}},
		{ImportPath: m("httpidem"), Imports: []string{m("internal/retry")}},
		{ImportPath: m("internal/invalid"), Imports: []string{m("store")}},
		{ImportPath: m("keyer"), Imports: []string{m("internal/fphook")}},    // good: keyer sets the hook
		{ImportPath: m("httpidem"), Imports: []string{m("internal/fphook")}}, // good: httpidem calls it
		{ImportPath: m("dedup"), Imports: []string{m("internal/fphook")}},
		// Decorators: store only; their tests may import backends, storetest and each other.
		{ImportPath: m("store/cache"), Imports: []string{m("store"), "hash/maphash"},
			XTestImports: []string{m("store/memory"), m("store/redis"), m("store/seal"), m("storetest"), m("internal/testenv")}}, // good
		{ImportPath: m("store/seal"), Imports: []string{m("store"), "crypto/aes"},
			XTestImports: []string{m("store/postgres"), m("store/cache"), m("idem")}}, // good
		{ImportPath: m("store/seal"), Imports: []string{m("store/redis")}},
		{ImportPath: m("store/cache"), Imports: []string{"github.com/redis/go-redis/v9"}},
		{ImportPath: m("store/cache"), Imports: []string{m("internal/coalesce")}},
		{ImportPath: m("store/memory"), XTestImports: []string{m("store/cache")}}, // good: a decorator is not a backend
		// The nested Spanner module: its SDK (admin clients included) and
		// the SDK's error codes are its driver; nothing else is.
		{ImportPath: m("store/spanner"), Imports: []string{m("store"), "cloud.google.com/go/spanner", "cloud.google.com/go/spanner/admin/database/apiv1", "google.golang.org/grpc/codes"}, TestImports: []string{m("storetest"), m("internal/seedtest")}}, // good
		{ImportPath: m("store/spanner"), Imports: []string{"google.golang.org/grpc"}},
		{ImportPath: m("store/spanner"), Imports: []string{"cloud.google.com/go/spannerx"}},
		{ImportPath: m("store/spanner"), Imports: []string{m("store/postgres")}},
		{ImportPath: m("store/spanner"), XTestImports: []string{m("store/memory")}},
		{ImportPath: m("store/postgres"), Imports: []string{"cloud.google.com/go/spanner"}},
	}
	got := Check(pkgs)
	want := []string{
		"cmd/idemload imports " + m("internal/testenv"),
		"contrib/ginidem imports " + m("store/sqlite"),
		"purge imports " + m("httpidem"),
		"dedup imports " + m("httpidem"),
		"httpidem imports " + m("examples/payments"),
		"httpidem imports " + m("internal/coalesce"),
		"httpidemtest imports " + m("httpidem") + ": httpidemtest may import only [keyer]",
		"httpidemtest imports " + m("internal/brokenidem") + ": a library package imports no internal package",
		"internal/coalesce imports " + m("store"),
		"store/redis imports " + m("internal/sqltx"),
		"httpidem imports " + m("internal/retry"),
		"internal/invalid imports " + m("store"),
		"dedup imports " + m("internal/fphook"),
		"keyer imports github.com/stretchr/testify/assert",
		"newpkg imports " + m("store") + ": package newpkg is not in DESIGN.md's layout table",
		"store imports " + m("store/memory"),
		"store/memory imports " + m("store/redis"),
		"store/redis imports " + m("store/sqlite"),
		"store/redis imports github.com/jackc/pgx/v5",
		"storetest imports " + m("internal/testenv"),
		"store/nats imports github.com/redis/go-redis/v9",
		"store/nats imports github.com/nats-io/nats-server/v2/server",
		"store/nats imports " + m("store/memory"),
		"store/dynamodb imports github.com/redis/go-redis/v9",
		"store/dynamodb imports " + m("idem") + ": a backend imports only store",
		"store/dynamodb imports " + m("store/memory") + ": a backend's tests import no other backend",
		"store/redis imports github.com/aws/aws-sdk-go-v2/service/dynamodb",
		"store/dynamodb imports github.com/aws/aws-sdk-go-v2-fork/service/dynamodb",
		"storetest/linearize imports " + m("idem"),
		"store/seal imports " + m("store/redis") + ": store/seal may import only [store]",
		"store/cache imports github.com/redis/go-redis/v9: a library package imports no third-party module",
		"store/cache imports " + m("internal/coalesce") + ": a library package imports no internal package",
		"store/spanner imports google.golang.org/grpc:",
		"store/spanner imports cloud.google.com/go/spannerx:",
		"store/spanner imports " + m("store/postgres"),
		"store/spanner imports " + m("store/memory"),
		"store/postgres imports cloud.google.com/go/spanner:",
	}
	if len(got) != len(want) {
		t.Fatalf("Check found %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if strings.Contains(g, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no violation %q among:\n%s", w, strings.Join(got, "\n"))
		}
	}
}
