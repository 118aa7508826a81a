package readmetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestREADME compiles every Go block of README.md; each block is a subtest
// named README.md:<line> that reports the compiler's errors at README lines.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the README's snippets")
	}
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(string(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 5 {
		t.Fatalf("found only %d Go blocks in README.md", len(blocks))
	}
	// A module of its own in a temporary directory, outside the source tree
	// (the test writes nothing into it), that requires this module through
	// a replace to the checkout: the snippets build against the code as it is.
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := fmt.Sprintf("module readme\n\ngo 1.26\n\nrequire github.com/idemkit/idemkit v0.0.0\n\nreplace github.com/idemkit/idemkit => %s\n", root)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, b := range blocks {
		src := File(b, "readme", fmt.Sprintf("block%d", i))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("block_%04d.go", b.Line)), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-gcflags=-e", "-o", os.DevNull, ".")
	cmd.Dir = dir
	// GOWORK=off builds against the root module's own requirements, which may
	// name versions the workspace never needed: let go fetch them like any
	// build, and complete the temporary go.mod (-mod=mod) from them.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, buildErr := cmd.CombinedOutput()
	perBlock, other := attribute(string(out), blocks)
	if buildErr != nil && len(perBlock) == 0 {
		t.Fatalf("go build failed, with no error in any block:\n%s", out)
	}
	for _, line := range other {
		t.Errorf("go build: %s", line)
	}
	for _, b := range blocks {
		t.Run(b.Name(), func(t *testing.T) {
			errs := perBlock[b.Line]
			switch {
			case len(errs) > 0 && b.Pending != "":
				t.Skipf("pending (%s); does not compile yet:\n%s", b.Pending, strings.Join(errs, "\n"))
			case len(errs) > 0:
				t.Errorf("the README's Go block at line %d does not compile:\n%s\n\nthe block as compiled (see internal/readmetest for the readme:wrap convention):\n%s",
					b.Line, strings.Join(errs, "\n"), File(b, "readme", "block"))
			case b.Pending != "":
				t.Errorf("the block compiles now: remove its <!-- readme:pending %s --> comment", b.Pending)
			}
		})
	}
}

var errLine = regexp.MustCompile(`^(?:\./)?(README\.md(?:-L(\d+)-wrap(?:-post)?)?):(\d+)(?::\d+)?: (.*)$`)

// attribute sorts compiler errors by the block they are in.
func attribute(out string, blocks []Block) (map[int][]string, []string) {
	per := map[int][]string{}
	var other []string
	last := -1 // the block of the previous error, for its indented continuation lines
	for _, raw := range strings.Split(out, "\n") {
		l := strings.TrimSpace(raw)
		if l == "" || strings.HasPrefix(l, "#") || strings.Contains(l, "too many errors") || strings.HasPrefix(l, "go: downloading ") {
			continue
		}
		m := errLine.FindStringSubmatch(l)
		if m == nil && last >= 0 && raw != l && strings.TrimLeft(raw, " \t") == l {
			per[last] = append(per[last], l) // "\thave …", "\twant …" under the error above
			continue
		}
		last = -1
		if m == nil {
			other = append(other, l)
			continue
		}
		if m[2] != "" {
			n, _ := strconv.Atoi(m[2])
			per[n] = append(per[n], "(in the readme:wrap lines) "+l)
			last = n
			continue
		}
		n, _ := strconv.Atoi(m[3])
		owner := -1
		for _, b := range blocks {
			if n >= b.Line && n < b.Line+strings.Count(b.Code, "\n")+1 {
				owner = b.Line
			}
		}
		if owner < 0 {
			other = append(other, l)
			continue
		}
		per[owner] = append(per[owner], l)
		last = owner
	}
	return per, other
}

// The wrapping itself: statements go in a function, imports are added for
// the names used, readme: comments are read, and a bad block is reported
// at its README line.
func TestBlocksAndFile(t *testing.T) {
	md := "intro\n\n<!-- readme:pending not merged -->\n<!-- readme:wrap\nvar key string\n---\n_ = c\n-->\n```go\nc, err := store.NewToken(), error(nil)\n_ = key\nreturn err\n```\n\n```sh\ngo test\n```\n\n```go\nfunc F() time.Duration { return time.Second }\n```\n"
	blocks, err := Blocks(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("got %d blocks, want 2: %+v", len(blocks), blocks)
	}
	b := blocks[0]
	if b.Line != 10 || b.Pending != "not merged" || strings.TrimSpace(b.Pre) != "var key string" || strings.TrimSpace(b.Post) != "_ = c" {
		t.Fatalf("first block = %+v", b)
	}
	src := File(b, "p", "f")
	for _, want := range []string{`"github.com/idemkit/idemkit/store"`, "func f() error {", "//line README.md:10\n"} {
		if !strings.Contains(src, want) {
			t.Errorf("generated file lacks %q:\n%s", want, src)
		}
	}
	top := File(blocks[1], "p", "g")
	if strings.Contains(top, "func g()") || !strings.Contains(top, `"time"`) {
		t.Errorf("a declaration block is not wrapped in a function and gets its imports:\n%s", top)
	}
	for _, bad := range []string{"<!-- readme:wrap\nx\n", "```go\nx\n", "<!-- readme:pending -->\n```go\nx\n```\n", "<!-- readme:pending why -->\ntext\n```go\nx\n```\n"} {
		if _, err := Blocks(bad); err == nil {
			t.Errorf("Blocks(%q) accepted a malformed README", bad)
		}
	}
	per, other := attribute("# readme\n./README.md:11:2: undefined: x\nREADME.md-L10-wrap:1:5: y\nweird\n", blocks)
	if len(per[10]) != 2 || len(other) != 1 {
		t.Errorf("attribute = %v, %v", per, other)
	}
}

// mdLink matches a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdPath matches a repository path written in backquotes, such as
// `store/postgres/doc.go` or `examples/payments`: a path with a slash or a
// known file ending.
var mdPath = regexp.MustCompile("`((?:[a-z0-9_.-]+/)+[a-zA-Z0-9_.-]+\\.(?:go|md|sh|txt|sql)|[A-Z][A-Z_-]*\\.md)`")

// TestMarkdownLinks checks that every relative link and every backquoted
// file path of the repository's Markdown files names a file that exists.
func TestMarkdownLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md").Output()
	if err != nil {
		t.Skipf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	if len(files) < 3 {
		t.Fatalf("found only %d Markdown files", len(files))
	}
	for _, f := range files {
		md, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		check := func(target string, fromFile bool) {
			target, _, _ = strings.Cut(target, "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				return
			}
			base := root
			if fromFile {
				base = filepath.Join(root, filepath.Dir(f))
			}
			if _, err := os.Stat(filepath.Join(base, target)); err != nil {
				if _, err2 := os.Stat(filepath.Join(root, target)); fromFile || err2 != nil {
					t.Errorf("%s names %s, which does not exist", f, target)
				}
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(md), -1) {
			check(m[1], true)
		}
		for _, m := range mdPath.FindAllStringSubmatch(string(md), -1) {
			check(m[1], false)
		}
	}
}
