package storetest

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// The case names the package documentation gives are real ones.
func TestDocNamesRealCases(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var real []string
	for _, g := range groups() {
		for _, c := range g.cases {
			real = append(real, g.name+"/"+c.name)
		}
	}
	names := regexp.MustCompile(`\b[A-Z][a-z]+/[A-Z][A-Za-z]+\b`).FindAllString(string(doc), -1)
	if len(names) == 0 {
		t.Fatal("found no Group/Case names in doc.go")
	}
	for _, n := range names {
		if !slices.Contains(real, n) {
			t.Errorf("doc.go names %s, which is no case of the suite", n)
		}
	}
}
