// Package readmetest compiles every Go code block of the module's README.md,
// so a snippet a new user copies builds against the code as it is. Its test
// does the work; this file holds the block extraction and the wrapping.
//
// # How a block is compiled
//
// Every block fenced with ```go is written to its own file of one generated
// package, in a temporary module outside the source tree that requires this
// module through a replace to the checkout, with a //line directive so that
// compiler errors point at README.md's own lines; the package is built once.
// How a block is wrapped depends on how it starts:
//
//   - "package ...": a whole file, compiled as it is (its package clause is
//     replaced by the generated package's).
//   - "import", "func", "type", "var (" or "const": top-level declarations.
//   - anything else: statements, placed in the body of a function
//     `func() error`, so a block may `return err`.
//
// Imports a block leaves out are added from the short names it uses
// (context, http, time, store, memory, sqlite, postgres, redis for
// idemkit's store/redis, goredis for go-redis, pgxpool, ...; see
// knownImports); names the snippet takes for granted are declared in a
// hidden HTML comment right before the block:
//
//	<!-- readme:wrap
//	ctx := context.Background()
//	var key string
//	---
//	_ = tx
//	-->
//
// Lines before "---" go before the block (inside the function for
// statements, at top level for declarations); lines after it go after the
// block (so an unused variable can be used, or a final `return err`
// added). A second comment, <!-- readme:pending why -->, marks a block
// written for an API that is not merged yet: its failure is reported as a
// skip with the reason, and once it compiles the marker itself is an error,
// so it is removed as soon as it is no longer needed.
package readmetest

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"sort"
	"strings"
)

// Block is one ```go block of the README.
type Block struct {
	Line    int    // README line of the block's first code line
	Code    string // the code, without the fences
	Pre     string // from a readme:wrap comment: lines before the block
	Post    string // from a readme:wrap comment: lines after the block
	Pending string // from a readme:pending comment: why it may not compile yet
}

// Name is how the block is reported: README.md:<line>.
func (b Block) Name() string { return fmt.Sprintf("README.md:%d", b.Line) }

// Blocks returns the ```go blocks of a Markdown text, with the hidden
// readme: comments right before each.
func Blocks(md string) ([]Block, error) {
	var (
		blocks  []Block
		lines   = strings.Split(md, "\n")
		pending Block // comments seen since the last block
	)
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case strings.HasPrefix(l, "<!-- readme:wrap"):
			var body []string
			rest := strings.TrimSpace(strings.TrimPrefix(l, "<!-- readme:wrap"))
			if rest != "" {
				return nil, fmt.Errorf("README.md:%d: put the readme:wrap lines below the comment's first line", i+1)
			}
			j := i + 1
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != "-->"; j++ {
				body = append(body, lines[j])
			}
			if j == len(lines) {
				return nil, fmt.Errorf("README.md:%d: readme:wrap comment never closed with a line \"-->\"", i+1)
			}
			pre, post, _ := strings.Cut(strings.Join(body, "\n"), "\n---")
			if strings.HasPrefix(strings.Join(body, "\n"), "---") {
				pre, post = "", strings.TrimPrefix(strings.Join(body, "\n"), "---")
			}
			pending.Pre, pending.Post = pre, post
			i = j
		case strings.HasPrefix(l, "<!-- readme:pending"):
			why := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, "<!-- readme:pending"), "-->"))
			if why == "" {
				return nil, fmt.Errorf("README.md:%d: readme:pending needs a reason", i+1)
			}
			pending.Pending = why
		case l == "```go":
			j := i + 1
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			}
			if j == len(lines) {
				return nil, fmt.Errorf("README.md:%d: ```go block never closed", i+1)
			}
			b := pending
			b.Line = i + 2
			b.Code = strings.Join(lines[i+1:j], "\n")
			blocks = append(blocks, b)
			pending = Block{}
			i = j
		case strings.HasPrefix(l, "```"):
			// Another language's block: skip it whole, and forget comments.
			j := i + 1
			for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			}
			pending = Block{}
			i = j
		case l != "" && (pending.Pre != "" || pending.Post != "" || pending.Pending != ""):
			return nil, fmt.Errorf("README.md:%d: a readme: comment must come right before a ```go block", i+1)
		}
	}
	return blocks, nil
}

// knownImports maps the short names README snippets use to import paths.
var knownImports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"io":         "io",
	"log":        "log",
	"slog":       "log/slog",
	"http":       "net/http",
	"os":         "os",
	"strconv":    "strconv",
	"strings":    "strings",
	"time":       "time",
	"testing":    "testing",
	"sql":        "database/sql",
	"store":      "github.com/idemkit/idemkit/store",
	"memory":     "github.com/idemkit/idemkit/store/memory",
	"sqlite":     "github.com/idemkit/idemkit/store/sqlite",
	"postgres":   "github.com/idemkit/idemkit/store/postgres",
	"redis":      "github.com/idemkit/idemkit/store/redis",
	"storetest":  "github.com/idemkit/idemkit/storetest",
	"keyer":      "github.com/idemkit/idemkit/keyer",
	"httpidem":   "github.com/idemkit/idemkit/httpidem",
	"dedup":      "github.com/idemkit/idemkit/dedup",
	"mysql":      "github.com/idemkit/idemkit/store/mysql",
	"idem":       "github.com/idemkit/idemkit/idem",
	"idemclient": "github.com/idemkit/idemkit/idemclient",
	"purge":      "github.com/idemkit/idemkit/purge",
	"goredis":    "github.com/redis/go-redis/v9",
	"pgx":        "github.com/jackc/pgx/v5",
	"pgxpool":    "github.com/jackc/pgx/v5/pgxpool",
}

// topLevel reports whether code is declarations rather than statements.
func topLevel(code string) bool {
	first := firstCodeLine(code)
	for _, p := range []string{"package ", "import ", "import(", "func ", "type ", "var (", "const "} {
		if strings.HasPrefix(first, p) {
			return true
		}
	}
	return false
}

func firstCodeLine(code string) string {
	sc := bufio.NewScanner(strings.NewReader(code))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l != "" && !strings.HasPrefix(l, "//") {
			return l
		}
	}
	return ""
}

// File returns the Go source that compiles b as part of package pkg, in a
// function named fn when b is statements.
func File(b Block, pkg, fn string) string {
	code := b.Code
	if strings.HasPrefix(firstCodeLine(code), "package ") {
		// Drop the snippet's own package clause, keeping line numbers.
		lines := strings.Split(code, "\n")
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "package ") {
				lines[i] = ""
				break
			}
		}
		code = strings.Join(lines, "\n")
	}
	wrap := fmt.Sprintf("README.md-L%d-wrap", b.Line)
	var body strings.Builder
	if topLevel(b.Code) {
		fmt.Fprintf(&body, "//line %s:1\n%s\n//line README.md:%d\n%s\n//line %s-post:1\n%s\n", wrap, b.Pre, b.Line, code, wrap, b.Post)
	} else {
		fmt.Fprintf(&body, "func %s() error {\n//line %s:1\n%s\n//line README.md:%d\n%s\n//line %s-post:1\n%s\nreturn nil\n}\n", fn, wrap, b.Pre, b.Line, code, wrap, b.Post)
	}
	imports := missingImports(body.String())
	var out strings.Builder
	fmt.Fprintf(&out, "// Code generated by internal/readmetest from %s. DO NOT EDIT.\n\npackage %s\n\n", b.Name(), pkg)
	if len(imports) > 0 {
		out.WriteString("import (\n")
		for _, name := range imports {
			path := knownImports[name]
			if last := path[strings.LastIndex(path, "/")+1:]; last == name {
				fmt.Fprintf(&out, "\t%q\n", path)
			} else {
				fmt.Fprintf(&out, "\t%s %q\n", name, path)
			}
		}
		out.WriteString(")\n\n")
	}
	out.WriteString(body.String())
	return out.String()
}

// missingImports returns the known short names src uses as package
// qualifiers without importing them. src is a file body without its package
// clause; when it does not parse, it returns what a token scan finds, and
// the compiler reports the syntax error.
func missingImports(src string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", "package x\n"+src, parser.SkipObjectResolution)
	used := map[string]bool{}
	imported := map[string]bool{}
	if err == nil {
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imported[name] = true
			if path == "github.com/redis/go-redis/v9" && imp.Name == nil {
				imported["redis"] = true // go-redis's package name
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok {
					used[id.Name] = true
				}
			}
			return true
		})
	} else {
		for _, name := range sortedKeys(knownImports) {
			if strings.Contains(src, name+".") {
				used[name] = true
			}
		}
	}
	var out []string
	for name := range used {
		if _, known := knownImports[name]; known && !imported[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
