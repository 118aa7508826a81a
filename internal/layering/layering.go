// Package layering checks that the module's imports run only down the
// layout table of docs/DESIGN.md. Its test runs the check on the module as
// it is; CI runs that test.
//
// The table, as rules:
//
//	store                      the standard library only
//	keyer                      the standard library, internal/fphook
//	storetest                  store and the standard library
//	storetest/linearize        store and the standard library
//	store/<backend>            store, internal/coalesce, its own driver, the standard library; never another backend
//	                           (store/nats, a nested module: store and nats.go, jetstream included)
//	                           (store/dynamodb is a nested module; its driver is the AWS SDK for Go v2 with smithy-go)
//	store/cache, store/seal    decorators (a Store that wraps any Store): store and the standard library; their tests may import backends
//	                           (store/spanner, a nested module: its SDK, cloud.google.com/go/spanner, is its driver)
//	internal/coalesce          the standard library only (support code for backends)
//	internal/sqltx             the standard library, internal/invalid (transactions of store/sqlite and store/mysql)
//	internal/retry             the standard library, internal/invalid (the retry loop of idemclient and contrib/grpcidem)
//	internal/invalid           the standard library only (the ErrInvalid sentinel and the options rule; anyone may import it)
//	internal/ascii             the standard library only (the plain-ASCII word test of store's checks and store/memory's)
//	internal/fphook            the standard library only (keyer's fingerprint into a buffer httpidem pools; keyer and httpidem import it)
//	idem (the engine)          store, keyer
//	httpidem                   idem, store, keyer, internal/fphook
//	httpidemtest               keyer (it proves any endpoint, so it knows no store or middleware)
//	dedup                      idem, store, keyer
//	purge                      store
//	idemclient                 keyer
//	contrib/<module>           the library packages above, and its own module's third-party dependencies
//	internal/<test helper>     imported only by tests (and by other test helpers)
//	examples/..., cmd/...      imported by nothing
//
// A library package (everything but examples, cmd and internal) imports no
// internal package outside its tests but the backends' support code, and no
// third-party module other than its backend's driver.
package layering

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Module is the module path the rules are written for.
const Module = "github.com/idemkit/idemkit"

// Package is what the check needs of one package, as `go list -json`
// reports it.
type Package struct {
	ImportPath   string
	Imports      []string // non-test imports
	TestImports  []string // imports of the package's own _test files
	XTestImports []string // imports of its external _test package
}

// drivers lists the third-party import path prefixes each backend may use.
var drivers = map[string][]string{
	"store/memory":   nil,
	"store/sqlite":   {"modernc.org/sqlite"},
	"store/postgres": {"github.com/jackc/pgx/v5"},
	"store/redis":    {"github.com/redis/go-redis/v9"},
	"store/mysql":    {"github.com/go-sql-driver/mysql"},
	// Nested modules (their own go.mod): backends whose SDKs core users
	// must not download.
	"store/nats":     {"github.com/nats-io/nats.go"},
	"store/dynamodb": {"github.com/aws/aws-sdk-go-v2", "github.com/aws/smithy-go"},
	// spanner's SDK reports errors as gRPC codes.
	"store/spanner": {"cloud.google.com/go/spanner", "google.golang.org/grpc/codes"},
}

// decorators lists the packages under store/ that wrap any store.Store
// rather than store records themselves: they import store and the standard
// library only, and their tests may import backends (and each other), since
// a decorator is proven by running the suite over real backends.
var decorators = []string{"store/cache", "store/seal"}

func isDecorator(r string) bool { return slices.Contains(decorators, r) }

// allowed lists, for each library package, the packages of the module it
// may import outside its tests.
var allowed = map[string][]string{
	"store":               {},
	"keyer":               {},
	"storetest":           {"store"},
	"storetest/linearize": {"store"},
	"idem":                {"store", "keyer"},
	"httpidem":            {"idem", "store", "keyer"},
	"httpidemtest":        {"keyer"},
	"dedup":               {"idem", "store", "keyer"},
	"purge":               {"store"},
	"idemclient":          {"keyer"},
	// The decorators.
	"store/cache": {"store"},
	"store/seal":  {"store"},
}

// contribMay lists the packages of the module that a nested integration
// module (contrib/<name>) may import outside its tests. Its third-party
// imports are its own go.mod's business: keeping them out of the core
// module is why it is a module of its own.
var contribMay = []string{"idem", "store", "keyer", "purge", "httpidem", "dedup", "idemclient"}

// libraryInternal lists the internal packages that are not test helpers:
// support code for cmd and examples, which may import them.
var libraryInternal = []string{"internal/loadtest", backendSupport, argSupport, sqlSupport, retrySupport, asciiSupport, fpSupport}

// argSupport holds the one "invalid argument" sentinel (store.ErrInvalid and
// keyer.ErrInvalid are that value) and the rule options are applied by;
// every library package and contrib module may import it. It imports the
// standard library only.
const argSupport = "internal/invalid"

// sqlSupport is the transaction skeleton (BEGIN/COMMIT, SAVEPOINTs) of the
// database/sql backends, store/sqlite and store/mysql. It imports the
// standard library and argSupport only.
const sqlSupport = "internal/sqltx"

// retrySupport is the client retry loop and backoff shared by idemclient and
// contrib/grpcidem's client. It imports the standard library only.
const retrySupport = "internal/retry"

// asciiSupport is the word-at-a-time plain-ASCII test shared by the store
// package's argument checks and store/memory's hot-path checks. It imports
// nothing.
const asciiSupport = "internal/ascii"

// fpSupport is the hook by which keyer fingerprints a request into a buffer
// httpidem pools (the body of a lease-mode request). It imports the
// standard library only.
const fpSupport = "internal/fphook"

// supportUsers says which packages may import each support package.
var supportUsers = map[string]func(from string) bool{
	backendSupport: isBackend,
	argSupport:     func(string) bool { return true },
	sqlSupport:     func(r string) bool { return r == "store/sqlite" || r == "store/mysql" },
	retrySupport:   func(r string) bool { return r == "idemclient" || isContrib(r) },
	asciiSupport:   func(r string) bool { return r == "store" || r == "store/memory" },
	fpSupport:      func(r string) bool { return r == "keyer" || r == "httpidem" },
}

// backendSupport is the internal package backends may import: the batcher
// that groups their concurrent calls. It imports the standard library only.
const backendSupport = "internal/coalesce"

// rel returns path relative to the module, and whether it is in the module.
// mayUseSupport reports whether the package from may import the support
// package r.
func mayUseSupport(from, r string) bool {
	users, ok := supportUsers[r]
	return ok && users(from)
}

func rel(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, Module+"/")
	return r, ok
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func isBackend(r string) bool {
	if isDecorator(r) {
		return false
	}
	_, ok := drivers[r]
	return ok || (strings.HasPrefix(r, "store/") && !strings.Contains(strings.TrimPrefix(r, "store/"), "/"))
}

func isTestHelper(r string) bool {
	return strings.HasPrefix(r, "internal/") && !slices.Contains(libraryInternal, r)
}

func isApp(r string) bool {
	return r == "examples" || strings.HasPrefix(r, "examples/") || r == "cmd" || strings.HasPrefix(r, "cmd/") ||
		(isContrib(r) && (strings.HasSuffix(r, "/example") || strings.Contains(r, "/example/")))
}

// isContrib reports whether r is in a nested integration module.
func isContrib(r string) bool { return strings.HasPrefix(r, "contrib/") }

// Check returns one line for every import that goes up the table, sorted.
func Check(pkgs []Package) []string {
	var bad []string
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		fail := func(imp, why string) {
			bad = append(bad, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, why))
		}
		// Nothing imports examples or cmd, tests included.
		for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
			if r, ok := rel(imp); ok && isApp(r) && !strings.HasPrefix(from, r) {
				fail(imp, "nothing imports examples or cmd")
			}
		}
		// Tests of a backend may not bring in another backend either.
		if isBackend(from) {
			for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
				if r, ok := rel(imp); ok && isBackend(r) && r != from {
					fail(imp, "a backend's tests import no other backend")
				}
			}
		}
		if _, ok := supportUsers[from]; ok {
			for _, imp := range p.Imports {
				switch r, _ := rel(imp); {
				case isStd(imp):
				case from == argSupport:
					fail(imp, from+" imports the standard library only")
				case r != argSupport:
					fail(imp, from+" imports the standard library and "+argSupport+" only")
				}
			}
			continue
		}
		if isApp(from) || strings.HasPrefix(from, "internal/") {
			for _, imp := range p.Imports {
				if r, ok := rel(imp); ok && isTestHelper(r) && !isTestHelper(from) {
					fail(imp, "internal test helpers are imported only by tests")
				}
			}
			continue
		}
		if isContrib(from) {
			for _, imp := range p.Imports {
				if r, ok := rel(imp); ok && !isContrib(r) && !slices.Contains(contribMay, r) && !mayUseSupport(from, r) {
					fail(imp, fmt.Sprintf("an integration module imports only %v of the core module", contribMay))
				}
			}
			continue
		}
		for _, imp := range p.Imports {
			if isStd(imp) {
				continue
			}
			r, inModule := rel(imp)
			switch {
			case !inModule:
				if !isBackend(from) || !slices.ContainsFunc(drivers[from], func(d string) bool { return imp == d || strings.HasPrefix(imp, d+"/") }) {
					fail(imp, "a library package imports no third-party module but its backend's driver")
				}
			case mayUseSupport(from, r):
			case strings.HasPrefix(r, "internal/"):
				fail(imp, "a library package imports no internal package outside its tests but its support packages ("+backendSupport+", "+sqlSupport+" for backends; "+retrySupport+" for clients; "+argSupport+")")
			case isBackend(from):
				if r != "store" {
					fail(imp, "a backend imports only store of this module")
				}
			default:
				may, known := allowed[from]
				switch {
				case !known:
					fail(imp, "package "+from+" is not in DESIGN.md's layout table: add it there and to internal/layering")
				case !slices.Contains(may, r):
					fail(imp, fmt.Sprintf("%s may import only %v of this module", from, may))
				}
			}
		}
	}
	sort.Strings(bad)
	return slices.Compact(bad)
}
