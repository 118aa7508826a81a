package doctest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// names maps the package names snippets use to import paths, besides the
// workspace's own packages (added by name in TestDocComments).
var names = map[string]string{
	"bytes": "bytes", "context": "context", "errors": "errors", "fmt": "fmt", "io": "io",
	"json": "encoding/json", "log": "log", "slog": "log/slog", "http": "net/http", "url": "net/url",
	"os": "os", "strconv": "strconv", "strings": "strings", "sync": "sync", "time": "time",
	"testing": "testing", "sql": "database/sql",
	"goredis": "github.com/redis/go-redis/v9", "pgx": "github.com/jackc/pgx/v5",
	"pgxpool": "github.com/jackc/pgx/v5/pgxpool",
	"gin":     "github.com/gin-gonic/gin", "echo": "github.com/labstack/echo/v4",
	"chi": "github.com/go-chi/chi/v5", "grpc": "google.golang.org/grpc",
	"insecure": "google.golang.org/grpc/credentials/insecure",
}

// TestDocComments compiles every Go block of every doc comment of every
// package of the workspace (the root module and the nested ones), each
// module's blocks against that module.
func TestDocComments(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the doc comments' snippets")
	}
	out, err := exec.Command("go", "list", "-json=Dir,ImportPath,Name,GoFiles,Module", "github.com/idemkit/idemkit/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []Package
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	all := map[string]string{}
	for k, v := range names {
		all[k] = v
	}
	byModule := map[string][]Block{}
	modDir := map[string]string{}
	root := ""
	for _, p := range pkgs {
		if p.Module == nil {
			continue
		}
		modDir[p.Module.Path] = p.Module.Dir
		if p.Module.Path == "github.com/idemkit/idemkit" {
			root = p.Module.Dir
		}
		if strings.Contains(p.ImportPath, "/internal/") {
			continue
		}
		if p.Name != "main" {
			all[p.Name] = p.ImportPath
		}
		blocks, err := Extract(p)
		if err != nil {
			t.Fatal(err)
		}
		byModule[p.Module.Path] = append(byModule[p.Module.Path], blocks...)
	}
	if len(byModule["github.com/idemkit/idemkit"]) < 5 {
		t.Fatalf("found only %d doc code blocks in the root module", len(byModule["github.com/idemkit/idemkit"]))
	}
	for mod, blocks := range byModule {
		t.Run(mod, func(t *testing.T) { build(t, mod, modDir[mod], root, blocks, all) })
	}
}

var errLine = regexp.MustCompile(`(block(\d+)\.go):(\d+)(?::\d+)?: (.*)$`)

// build compiles blocks in a temporary module that requires mod (in dir)
// and the root module, and reports each block's errors.
func build(t *testing.T, mod, dir, root string, blocks []Block, names map[string]string) {
	for i, errs := range compile(t, mod, dir, root, blocks, names) {
		t.Errorf("%s: a Go block of a doc comment does not compile:\n\t%s\n\nthe block:\n%s", blocks[i].Name(), strings.Join(errs, "\n\t"), blocks[i].Code)
	}
}

// compile returns the errors of each block that does not compile, by index.
func compile(t *testing.T, mod, dir, root string, blocks []Block, names map[string]string) map[int][]string {
	t.Helper()
	tmp := t.TempDir()
	gomod := fmt.Sprintf("module doctest\n\ngo 1.26\n\nrequire github.com/idemkit/idemkit v0.0.0\n\nreplace github.com/idemkit/idemkit => %s\n", root)
	if mod != "github.com/idemkit/idemkit" {
		gomod += fmt.Sprintf("\nrequire %s v0.0.0\n\nreplace %s => %s\n", mod, mod, dir)
	}
	var sum []byte
	for _, d := range []string{root, dir} {
		b, err := os.ReadFile(filepath.Join(d, "go.sum"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		sum = append(sum, b...)
	}
	write := func(name, src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", gomod)
	write("go.sum", string(sum))
	write("vocabulary.go", Vocabulary)
	parseErr := map[int]string{}
	for i, b := range blocks {
		kind, arity := Classify(b.Code)
		switch kind {
		case NotGo:
			continue
		case BrokenGo:
			parseErr[i] = "looks like Go but does not parse: write it so that it compiles (no `{ ... }`), or make it plainly not Go"
			continue
		}
		write(fmt.Sprintf("block%d.go", i), Source(b, kind, arity, "doctest", fmt.Sprintf("block%d.go", i), names))
	}
	cmd := exec.Command("go", "build", "-gcflags=-e", "-o", os.DevNull, ".")
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, buildErr := cmd.CombinedOutput()
	per := map[int][]string{}
	passed := 0 // errors the check passes over
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "go: ") || strings.Contains(l, "too many errors") {
			continue
		}
		m := errLine.FindStringSubmatch(l)
		if m == nil {
			continue // a continuation line, or go's own chatter
		}
		if strings.Contains(m[4], "declared and not used") || strings.Contains(m[4], "imported and not used") {
			passed++
			continue // a snippet shows a result without using it; the package's own dot import
		}
		i, _ := strconv.Atoi(m[2])
		per[i] = append(per[i], fmt.Sprintf("line %s of the block: %s", m[3], m[4]))
	}
	if buildErr != nil && len(per) == 0 && passed == 0 {
		t.Fatalf("go build failed outside any block:\n%s", out)
	}
	for i, bad := range parseErr {
		per[i] = append(per[i], bad)
	}
	return per
}

// TestCompileReports shows the check fails what it should: a block that
// calls an API with the wrong shape, a fragment with { ... }, and passes a
// good block, a table and a URL list.
func TestCompileReports(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	p := Package{ImportPath: "github.com/idemkit/idemkit/idem", Name: "idem"}
	blocks := []Block{
		{Pkg: p, Code: "e, err := idem.New(st)\nif err != nil {\n\treturn err\n}\n_ = e\n"},
		{Pkg: p, Code: "e := idem.New(st)\n"},
		{Pkg: p, Code: "e, err := New(st)\nif err != nil { ... }\n"},
		{Pkg: p, Code: "situation      what happens\nkey absent     claims, runs the work once\n"},
		{Pkg: p, Code: "postgres://user@host/db   a PostgreSQL pool\n"},
		{Pkg: p, Code: "res, err := e.Run(ctx, key, fingerprint, func(ctx context.Context) Verdict { return Keep(nil) })\n_, _ = res, err\n"},
	}
	got := compile(t, "github.com/idemkit/idemkit", root, root, blocks, names)
	for i, want := range []bool{false, true, true, false, false, false} {
		if (len(got[i]) > 0) != want {
			t.Errorf("block %d (%q): errors %q; want failure %v", i, blocks[i].Code, got[i], want)
		}
	}
}
