// Package doctest compiles every Go code block of the doc comments of every
// package in the workspace, so a snippet a user copies from `go doc` builds
// against the code as it is. Its test does the work; this file holds the
// extraction, the classification and the wrapping.
//
// # Which blocks are Go
//
// A code block (an indented block of a doc comment, as go/doc/comment
// parses it) is Go when it parses as a file, as top-level declarations or as
// statements. Tables, shell lines, SQL and URL lists do not, and are left
// alone; but a block that does not parse and still looks like Go (":=",
// "err != nil", "func(", "{ ... }") is reported: write it so that it
// compiles, or make it plainly not Go.
//
// # How a block is compiled
//
// Each Go block becomes a file of one generated package in a temporary module
// outside the source tree that requires the block's module through a replace.
// Statements go into the body of a function whose results fit the block's
// own return statements (none, an error, or a value and an error).
// Package-qualified names are imported from the workspace's packages by
// their names, and a package's own doc may use its own exported names
// unqualified or qualified by its name (`redis.New` in store/redis means
// that package; go-redis is `goredis`).
// The names that snippets take for granted (ctx, st, e, key, a handler, a
// request, ...) are package-level variables of the generated package,
// declared in Vocabulary; a block may shadow them.
package doctest

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Package is what the extraction needs of one package, as `go list -json`
// reports it.
type Package struct {
	Dir, ImportPath, Name string
	GoFiles               []string
	Module                *struct{ Path, Dir string }
}

// Block is one code block of a doc comment.
type Block struct {
	Pkg  Package
	File string // file name within Pkg.Dir
	Line int    // line of the comment that holds the block
	Code string
}

// Name is how the block is reported: the file and line of its comment.
func (b Block) Name() string {
	return fmt.Sprintf("%s:%d", filepath.Join(b.Pkg.ImportPath, b.File), b.Line)
}

// Extract returns the code blocks of every comment in p's Go files.
func Extract(p Package) ([]Block, error) {
	var out []Block
	for _, f := range p.GoFiles {
		fset := token.NewFileSet()
		af, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, cg := range af.Comments {
			var pr comment.Parser
			for _, b := range pr.Parse(cg.Text()).Content {
				if c, ok := b.(*comment.Code); ok {
					out = append(out, Block{Pkg: p, File: f, Line: fset.Position(cg.Pos()).Line, Code: c.Text})
				}
			}
		}
	}
	return out, nil
}

// Kind says what a block is.
type Kind uint8

const (
	NotGo      Kind = iota + 1 // a table, shell lines, SQL: left alone
	BrokenGo                   // looks like Go but does not parse
	File                       // a whole file (starts with package)
	Decls                      // top-level declarations
	Statements                 // statements, compiled in a function body
)

// Classify says what code is, and for statements how many values its
// top-level return statements return (0, 1 or 2).
func Classify(code string) (Kind, int) {
	if urlLine.MatchString(code) {
		return NotGo, 0 // "postgres://host/db" parses as a label and a comment
	}
	fset := token.NewFileSet()
	if strings.HasPrefix(strings.TrimSpace(code), "package ") {
		if _, err := parser.ParseFile(fset, "x.go", code, parser.SkipObjectResolution); err == nil {
			return File, 0
		}
		return BrokenGo, 0
	}
	if _, err := parser.ParseFile(fset, "x.go", "package x\n"+code, parser.SkipObjectResolution); err == nil {
		return Decls, 0
	}
	f, err := parser.ParseFile(fset, "x.go", "package x\nfunc _() {\n"+code+"\n}\n", parser.SkipObjectResolution)
	if err == nil {
		return Statements, returnArity(f.Decls[0].(*ast.FuncDecl).Body)
	}
	for _, tell := range []string{":=", "err != nil", "func(", "{ ... }"} {
		if strings.Contains(code, tell) {
			return BrokenGo, 0
		}
	}
	return NotGo, 0
}

// urlLine matches a block with a line that starts with a URL.
var urlLine = regexp.MustCompile(`(?m)^\s*[a-z][a-z0-9+.-]*://`)

// returnArity is the largest number of results of a return statement in
// body, outside function literals.
func returnArity(body *ast.BlockStmt) int {
	n := 0
	ast.Inspect(body, func(node ast.Node) bool {
		switch x := node.(type) {
		case *ast.FuncLit:
			return false
		case *ast.ReturnStmt:
			n = max(n, len(x.Results))
		}
		return true
	})
	return n
}

// Source returns the Go file that compiles b as part of package pkg, with
// the imports it needs, given the import path of each package name
// (names). A package's own name means that package.
// Compiler errors name the block by label (its //line file name).
func Source(b Block, kind Kind, arity int, pkg, label string, names map[string]string) string {
	own := map[string]string{}
	for k, v := range names {
		own[k] = v
	}
	own[b.Pkg.Name] = b.Pkg.ImportPath
	code := b.Code
	var body strings.Builder
	line := fmt.Sprintf("//line %s:1\n", label)
	switch kind {
	case File:
		lines := strings.Split(code, "\n")
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "package ") {
				lines[i] = ""
				break
			}
		}
		body.WriteString(line + strings.Join(lines, "\n") + "\n")
	case Decls:
		body.WriteString(line + code + "\n")
	default:
		results, ret := "", ""
		switch arity {
		case 1:
			results, ret = " error", "return nil\n"
		case 2:
			results, ret = " (any, error)", "return nil, nil\n"
		}
		fmt.Fprintf(&body, "func %s()%s {\n%s%s\n//line generated:1\n%s}\n", strings.TrimSuffix(label, ".go"), results, line, code, ret)
	}
	used := qualifiers(body.String())
	var imports []string
	for _, name := range used {
		if path, ok := own[name]; ok && !declaresImport(body.String(), path) {
			imports = append(imports, fmt.Sprintf("\t%s %q\n", name, path))
		}
	}
	sort.Strings(imports)
	if b.Pkg.Name != "main" && b.Pkg.ImportPath != "" {
		// The package's own exported names, unqualified, as its doc may use
		// them (an unused dot import is an error the test passes over).
		imports = append(imports, fmt.Sprintf("\t. %q\n", b.Pkg.ImportPath))
	}
	var out strings.Builder
	fmt.Fprintf(&out, "// Code generated by internal/doctest from %s. DO NOT EDIT.\n\npackage %s\n\n", b.Name(), pkg)
	if len(imports) > 0 {
		out.WriteString("import (\n" + strings.Join(imports, "") + ")\n\n")
	}
	out.WriteString(body.String())
	return out.String()
}

// qualifiers returns the identifiers src uses as selector bases (x in x.Y),
// which may be package names.
func qualifiers(src string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\n"+src, parser.SkipObjectResolution)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	for _, imp := range f.Imports {
		if imp.Name != nil {
			seen[imp.Name.Name] = true // imported by the block itself
		} else {
			p := strings.Trim(imp.Path.Value, `"`)
			seen[p[strings.LastIndex(p, "/")+1:]] = true
		}
	}
	var out []string
	add := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && !seen[id.Name] && !add[id.Name] {
				add[id.Name] = true
				out = append(out, id.Name)
			}
		}
		return true
	})
	sort.Strings(out)
	return out
}

func declaresImport(src, path string) bool { return strings.Contains(src, fmt.Sprintf("%q", path)) }

// Vocabulary declares, at package level of the generated package, the
// names doc snippets take for granted. A block may shadow any of them.
const Vocabulary = `package doctest

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/memory"
)

var (
	ctx                     context.Context
	st                      store.Store
	e                       *idem.Engine
	key, fingerprint        string
	userID, tenant          string
	id, payloadFingerprint  string
	r                       *http.Request
	w                       http.ResponseWriter
	u                       *url.URL
	logger                  *slog.Logger
	db                      *sql.DB
	pool                    *pgxpool.Pool
	client                  goredis.UniversalClient
	createPayment           http.Handler
	router                  http.Handler
	amount                  int64
	redisStore, postgresStore store.Store
	tenantOf                func(key string) string
	countPayments           func(ctx context.Context) (int, error)
	newStore                func(t *testing.T) store.Store
	callerOf                func(ctx context.Context) ([]string, error)
	addr                    string
	req, resp               any
	userOf                  func(*http.Request) ([]string, error)
	charge                  func(ctx context.Context, key string) ([]byte, error)
	event                   struct{ ID string; Payload []byte }
	applyEvent              func(ctx context.Context, event struct{ ID string; Payload []byte }) error
	_                       = time.Second
)

// mystore stands for the backend a storetest snippet tests.
var mystore struct {
	New       func(opts ...func(*memory.Store)) *memory.Store
	WithClock func(now func() time.Time) func(*memory.Store)
}
`
