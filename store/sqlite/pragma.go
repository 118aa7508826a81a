package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/internal/invalid"
)

// pragmaSpec says which values a pragma takes and what SQLite reports for
// each when the pragma is read back.
type pragmaSpec struct {
	// words maps each accepted word (lower case) to the value read back.
	words map[string]string
	// integer: any integer is accepted and read back as it was written;
	// nonNegative refuses negative ones.
	integer, nonNegative bool
}

var (
	onOff        = map[string]string{"on": "1", "off": "0", "true": "1", "false": "0", "yes": "1", "no": "0", "1": "1", "0": "0"}
	knownPragmas = map[string]pragmaSpec{
		"synchronous":        {words: map[string]string{"off": "0", "normal": "1", "full": "2", "extra": "3", "0": "0", "1": "1", "2": "2", "3": "3"}},
		"journal_mode":       {words: map[string]string{"wal": "wal", "delete": "delete", "truncate": "truncate", "persist": "persist", "memory": "memory", "off": "off"}},
		"locking_mode":       {words: map[string]string{"normal": "normal", "exclusive": "exclusive"}},
		"temp_store":         {words: map[string]string{"default": "0", "file": "1", "memory": "2", "0": "0", "1": "1", "2": "2"}},
		"secure_delete":      {words: map[string]string{"on": "1", "off": "0", "fast": "2", "true": "1", "false": "0", "1": "1", "0": "0", "2": "2"}},
		"auto_vacuum":        {words: map[string]string{"none": "0", "full": "1", "incremental": "2", "0": "0", "1": "1", "2": "2"}},
		"foreign_keys":       {words: onOff},
		"recursive_triggers": {words: onOff},
		"cell_size_check":    {words: onOff},
		"trusted_schema":     {words: onOff},
		"busy_timeout":       {integer: true, nonNegative: true},
		"cache_size":         {integer: true},
		"mmap_size":          {integer: true, nonNegative: true},
		"wal_autocheckpoint": {integer: true},
		"journal_size_limit": {integer: true},
	}
)

// pragma is one checked pragma: its name, the value to set, and the value
// SQLite must report when it is read back.
type pragma struct {
	name, value, want string
}

// String returns the pragma in modernc.org/sqlite's "_pragma" form.
func (p pragma) String() string { return p.name + "(" + p.value + ")" }

// knownPragmaNames lists the pragmas WithPragma takes, for its error.
func knownPragmaNames() string {
	var names []string
	for n := range knownPragmas {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// parsePragma checks a pragma written "name(value)" or "name=value".
func parsePragma(s string) (pragma, error) {
	s = strings.TrimSpace(s)
	var name, value string
	if i := strings.IndexByte(s, '('); i >= 0 && strings.HasSuffix(s, ")") {
		name, value = s[:i], s[i+1:len(s)-1]
	} else if n, v, ok := strings.Cut(s, "="); ok {
		name, value = n, v
	} else {
		return pragma{}, fmt.Errorf("WithPragma(%q): write it as name(value), such as synchronous(FULL)", s)
	}
	name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
	spec, ok := knownPragmas[name]
	if !ok {
		return pragma{}, fmt.Errorf("WithPragma(%q): unknown pragma %q: pass one of %s", s, name, knownPragmaNames())
	}
	if spec.integer {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || (spec.nonNegative && n < 0) {
			what := "an integer"
			if spec.nonNegative {
				what = "an integer of 0 or more"
			}
			return pragma{}, fmt.Errorf("WithPragma(%q): %s takes %s", s, name, what)
		}
		v := strconv.FormatInt(n, 10)
		return pragma{name: name, value: v, want: v}, nil
	}
	want, ok := spec.words[strings.ToLower(value)]
	if !ok {
		var words []string
		for w := range spec.words {
			words = append(words, strings.ToUpper(w))
		}
		slices.Sort(words)
		return pragma{}, fmt.Errorf("WithPragma(%q): %s takes one of %s", s, name, strings.Join(words, ", "))
	}
	return pragma{name: name, value: strings.ToUpper(value), want: want}, nil
}

// checkPragmas reads every pragma given with WithPragma back on conn and
// returns an error when SQLite reports another value than the one set (a
// value the driver or the build ignored, such as journal_mode on an
// in-memory database, or an mmap_size above the build's limit).
func checkPragmas(ctx context.Context, conn *sql.Conn, pragmas []pragma, memory bool) error {
	last := map[string]pragma{}
	for _, p := range pragmas {
		last[p.name] = p // the last of one name wins, as the driver runs them in order
	}
	for _, p := range pragmas {
		if last[p.name] != p {
			continue
		}
		if memory && p.name == "journal_mode" {
			if p.want == "memory" || p.want == "off" {
				continue
			}
			return fmt.Errorf("%w: WithPragma(%q): an in-memory database keeps its journal in memory: drop the pragma", invalid.Err, p.String())
		}
		var got string
		if err := conn.QueryRowContext(ctx, "PRAGMA "+p.name).Scan(&got); err != nil {
			return fmt.Errorf("read back PRAGMA %s: %w", p.name, err)
		}
		if !strings.EqualFold(got, p.want) {
			return fmt.Errorf("%w: WithPragma(%q): SQLite reports %s = %s after open, not %s: the pragma did not take", invalid.Err, p.String(), p.name, got, p.want)
		}
	}
	return nil
}
