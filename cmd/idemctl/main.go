// Command idemctl lets an operator look inside an idemkit store and clear
// a stuck key: list the records by state, show one, release a key held by
// a crashed or hung holder (with an audit line), purge what has expired,
// and count the records by state. Every record shows its attempt count and
// fencing number (store.Entry.Attempt, Fence): an attempt above 1 is a key
// taken over from a holder whose lease lapsed, whose work may have run.
//
//	idemctl -store-url URL [-raw | -hash-secret-file FILE] COMMAND [flags] [args]
//
// It opens the store from its URL (store.Open, with the memory, SQLite,
// PostgreSQL, MySQL and Redis backends built in) and needs a store that
// implements store.Inspector. Run "idemctl -help" for the commands and
// examples.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idemkit/idemkit/keyer"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/memory"
	_ "github.com/idemkit/idemkit/store/mysql"
	_ "github.com/idemkit/idemkit/store/postgres"
	_ "github.com/idemkit/idemkit/store/redis"
	_ "github.com/idemkit/idemkit/store/sqlite"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // the store failed, or the operation was refused
	exitUsage   = 2 // bad flags or arguments
	envStoreURL = "IDEMCTL_STORE_URL"
)

const usage = `idemctl looks inside an idemkit store and clears stuck keys.

Usage:
  idemctl -store-url URL [global flags] COMMAND [flags] [args]

Commands:
  list     list records, oldest deadline first, with their attempt and fence
             --state in_progress|lapsed|completed|expired   (default: every state)
             --older-than D   only records whose deadline is at least D in the past
                              (negative: leases or retentions that end within -D)
             --prefix P       only keys that start with P (as stored)
             --limit N        at most N records (default 100, 0 for all)
             --json           JSON lines instead of a table
  show KEY     one record in any state: lease deadline, holder's token hashed,
               attempt, fence, sizes
             --response       also print the stored response (completed only)
             --json           one JSON line
  release KEY  free a live in-progress key, so the next Claim acquires it (attempt 1);
               a lapsed key is free already and stays as it is
             --reason TEXT    why (required; written to the audit line)
             --force          asked for a completed key: refused all the same (see below)
             --audit-file F   append the audit line (JSON) to F instead of stderr
  purge    delete the records whose retention is over, and lapsed ones store.LapsedKept
           after their lease (store.Purger)
  stats    records by state and the oldest lease in flight
             --json           one JSON line

Global flags:
  -store-url URL        the store (or $IDEMCTL_STORE_URL): memory://, sqlite:///path,
                        postgres://..., mysql://..., redis://...
  -raw                  print keys as stored (the form release and --prefix take)
  -hash-secret-file F   print keys as keyer.HashKeys with the secret in F (the
                        engine's log form when its processes share that secret)
  -timeout D            give up after D (default 30s)

By default keys are printed as keyer.DefaultRedactor does: hashed with a
secret drawn for this run, so a redacted key only matches others of the same
run. Use -raw to act on a key, or -hash-secret-file to match the engine's logs.

The stores keep no claim time: ages are counted from a record's deadline (the
end of its lease, or of its retention). A released key is free at once; a key
whose holder is still running may then run twice, which is why release wants
a reason and writes an audit line. A completed key is never released: the
store contract has no operation that deletes a completed record, so it stays
until its retention ends and purge removes it.

ATTEMPT counts the claims that acquired the key for the record: 1 for the
first, 2 after a takeover (a holder's lease lapsed and another claim took
the key: the first holder's work may have run, and its late Complete is
refused), and so on. A lapsed record is kept store.LapsedKept (24h) after
its lease for that count, and releasing it does nothing: the next claim
takes it over as the next attempt. FENCE grows with every claim that
acquires the key. A record written before attempts were counted shows
attempt 0 and fence 0.

Examples:
  idemctl -store-url postgres://db/app list --state in_progress
  idemctl -store-url postgres://db/app -raw list --state lapsed --older-than 10m --json
  idemctl -store-url sqlite:///var/lib/app/keys.db -raw show 'tenant:42|order-7'
  idemctl -store-url redis://cache:6379/0 release 'tenant:42|order-7' --reason "INC-123: worker hung"
  idemctl -store-url mysql://root@db:3306/app stats
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its arguments, output and exit code explicit, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, store.Open)
}

// cli is one run of idemctl.
type cli struct {
	s      store.Store
	in     store.Inspector
	url    string
	redact keyer.Redactor
	now    func() time.Time
	stdout io.Writer
	stderr io.Writer
}

func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, open func(context.Context, string) (store.Store, error)) int {
	fs := flag.NewFlagSet("idemctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	storeURL := fs.String("store-url", os.Getenv(envStoreURL), "")
	raw := fs.Bool("raw", false, "")
	secretFile := fs.String("hash-secret-file", "", "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return exitOK
		}
		return usageError(stderr, err.Error())
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError(stderr, "no command given")
	}
	if rest[0] == "help" {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	c := &cli{now: time.Now, stdout: stdout, stderr: stderr, redact: keyer.DefaultRedactor()}
	switch {
	case *raw && *secretFile != "":
		return usageError(stderr, "-raw and -hash-secret-file are exclusive: choose one form of the keys")
	case *raw:
		c.redact = keyer.RawKeys()
	case *secretFile != "":
		secret, err := os.ReadFile(*secretFile)
		if err != nil {
			return usageError(stderr, "-hash-secret-file: "+err.Error())
		}
		r, err := keyer.HashKeys(bytes.TrimRight(secret, "\r\n"))
		if err != nil {
			return usageError(stderr, "-hash-secret-file "+*secretFile+": "+err.Error())
		}
		c.redact = r
	}
	if *timeout <= 0 {
		return usageError(stderr, fmt.Sprintf("-timeout %v: pass a positive duration", *timeout))
	}
	cmd, ok := commands[rest[0]]
	if !ok {
		return usageError(stderr, fmt.Sprintf("unknown command %q (want list, show, release, purge or stats)", rest[0]))
	}
	if *storeURL == "" {
		return usageError(stderr, "no store: pass -store-url URL or set "+envStoreURL)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	s, err := open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintf(stderr, "idemctl: %v\n", err)
		return exitFailed
	}
	defer store.Close(s)
	in, ok := s.(store.Inspector)
	if !ok {
		fmt.Fprintf(stderr, "idemctl: the store (%T) does not implement store.Inspector: it cannot be listed\n", s)
		return exitFailed
	}
	c.s, c.in, c.url = s, in, *storeURL
	return cmd(c, ctx, rest[0], rest[1:])
}

var commands = map[string]func(*cli, context.Context, string, []string) int{
	"list":    (*cli).list,
	"show":    (*cli).show,
	"release": (*cli).release,
	"purge":   (*cli).purge,
	"stats":   (*cli).stats,
}

func usageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "idemctl: %s\nRun 'idemctl -help' for usage.\n", msg)
	return exitUsage
}

func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "idemctl: %v\n", err)
	return exitFailed
}

// parse parses a command's flags, which may come before or after its
// positional arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// entryJSON is a record as list, show and the audit line write it.
type entryJSON struct {
	Key              string     `json:"key"`
	State            string     `json:"state"`
	TokenHash        string     `json:"token_hash"`
	LockedUntil      *time.Time `json:"locked_until,omitempty"`
	ExpiresAt        time.Time  `json:"expires_at"`
	Attempt          uint32     `json:"attempt"`
	Fence            uint64     `json:"fence"`
	FingerprintBytes int        `json:"fingerprint_bytes"`
	ResponseBytes    int        `json:"response_bytes"`
}

func (c *cli) entryJSON(e store.Entry) entryJSON {
	j := entryJSON{Key: c.redact(e.Key), State: e.State.String(), TokenHash: e.TokenHash, ExpiresAt: e.ExpiresAt.UTC(),
		Attempt: e.Attempt, Fence: e.Fence, FingerprintBytes: e.FingerprintSize, ResponseBytes: e.ResponseSize}
	if !e.LockedUntil.IsZero() {
		t := e.LockedUntil.UTC()
		j.LockedUntil = &t
	}
	return j
}

func (c *cli) list(ctx context.Context, name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	state := fs.String("state", "", "")
	olderThan := fs.String("older-than", "", "")
	prefix := fs.String("prefix", "", "")
	limit := fs.Int("limit", 100, "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parse(fs, args)
	if err != nil {
		return usageError(c.stderr, "list: "+err.Error())
	}
	if len(pos) > 0 {
		return usageError(c.stderr, fmt.Sprintf("list: unexpected argument %q", pos[0]))
	}
	if *limit < 0 {
		return usageError(c.stderr, fmt.Sprintf("list: --limit %d: pass a positive number, or 0 for all", *limit))
	}
	o := store.ListOptions{Prefix: *prefix}
	if *state != "" {
		if o.State, err = store.ParseState(*state); err != nil {
			return usageError(c.stderr, "list: --state: "+strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
		}
	}
	if *olderThan != "" {
		d, err := time.ParseDuration(*olderThan)
		if err != nil {
			return usageError(c.stderr, fmt.Sprintf("list: --older-than %q: want a duration such as 10m or 1h30m", *olderThan))
		}
		o.ExpiresBefore = c.now().Add(-d)
	}
	var tw *tabwriter.Writer
	enc := json.NewEncoder(c.stdout)
	if !*asJSON {
		tw = tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tSTATE\tDEADLINE\tWHEN\tATTEMPT\tFENCE\tTOKEN\tRESPONSE")
	}
	now := c.now()
	printed := 0
	for {
		o.Limit = store.MaxListLimit
		if *limit > 0 {
			o.Limit = min(store.MaxListLimit, *limit-printed)
		}
		p, err := c.in.List(ctx, o)
		if err != nil {
			return c.fail(err)
		}
		for _, e := range p.Entries {
			if *asJSON {
				if err := enc.Encode(c.entryJSON(e)); err != nil {
					return c.fail(err)
				}
			} else {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\n", c.redact(e.Key), e.State, e.ExpiresAt.UTC().Format(time.RFC3339Nano),
					age(now, e.ExpiresAt), e.Attempt, e.Fence, e.TokenHash, e.ResponseSize)
			}
			printed++
		}
		if p.Next == "" || (*limit > 0 && printed >= *limit) {
			break
		}
		o.Cursor = p.Next
	}
	if tw != nil {
		if err := tw.Flush(); err != nil {
			return c.fail(err)
		}
	}
	return exitOK
}

// age says how long ago the deadline passed, or how soon it comes.
func age(now, deadline time.Time) string {
	d := now.Sub(deadline).Round(time.Millisecond)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

func (c *cli) oneKey(name string, fs *flag.FlagSet, args []string) (string, int) {
	pos, err := parse(fs, args)
	if err != nil {
		return "", usageError(c.stderr, name+": "+err.Error())
	}
	if len(pos) != 1 {
		return "", usageError(c.stderr, name+": want exactly one KEY, as 'idemctl -raw list' prints it")
	}
	return pos[0], exitOK
}

func (c *cli) show(ctx context.Context, name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	withResponse := fs.Bool("response", false, "")
	asJSON := fs.Bool("json", false, "")
	key, code := c.oneKey(name, fs, args)
	if code != exitOK {
		return code
	}
	e, err := c.in.Lookup(ctx, key)
	if err != nil {
		return c.fail(err)
	}
	var resp []byte
	if *withResponse && e.State == store.StateCompleted {
		r, err := c.s.Get(ctx, key)
		if err != nil {
			return c.fail(err)
		}
		resp = r.Response
	}
	if *asJSON {
		type showJSON struct {
			entryJSON
			Response *string `json:"response,omitempty"`
		}
		out := showJSON{entryJSON: c.entryJSON(e)}
		if resp != nil {
			s := string(resp)
			out.Response = &s
		}
		if err := json.NewEncoder(c.stdout).Encode(out); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	now := c.now()
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "key:\t%s\n", c.redact(e.Key))
	fmt.Fprintf(tw, "state:\t%s\n", e.State)
	if !e.LockedUntil.IsZero() {
		fmt.Fprintf(tw, "lease until:\t%s (%s)\n", e.LockedUntil.UTC().Format(time.RFC3339Nano), age(now, e.LockedUntil))
	}
	fmt.Fprintf(tw, "expires at:\t%s (%s)\n", e.ExpiresAt.UTC().Format(time.RFC3339Nano), age(now, e.ExpiresAt))
	fmt.Fprintf(tw, "token (sha256):\t%s\n", e.TokenHash)
	fmt.Fprintf(tw, "attempt:\t%d%s\n", e.Attempt, takeoverNote(e.Attempt))
	fmt.Fprintf(tw, "fence:\t%d\n", e.Fence)
	fmt.Fprintf(tw, "fingerprint:\t%d bytes\n", e.FingerprintSize)
	fmt.Fprintf(tw, "response:\t%d bytes\n", e.ResponseSize)
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	switch {
	case *withResponse && resp != nil:
		fmt.Fprintf(c.stdout, "\n%s\n", resp)
	case *withResponse:
		fmt.Fprintf(c.stderr, "idemctl: show: a %s record has no response to show\n", e.State)
	}
	return exitOK
}

// takeoverNote explains an attempt above 1 in show's text.
func takeoverNote(attempt uint32) string {
	switch {
	case attempt == 2:
		return " (taken over once: the earlier holder's work may have run)"
	case attempt > 2:
		return fmt.Sprintf(" (taken over %d times: earlier holders' work may have run)", attempt-1)
	}
	return ""
}

// audit is the line release writes.
type audit struct {
	Time      time.Time `json:"time"`
	Action    string    `json:"action"`
	Key       string    `json:"key"`
	Reason    string    `json:"reason"`
	Force     bool      `json:"force,omitempty"`
	Operator  string    `json:"operator,omitempty"`
	Store     string    `json:"store"`
	Before    string    `json:"state_before,omitempty"`
	TokenHash string    `json:"token_hash,omitempty"`
	LeaseEnd  string    `json:"lease_until,omitempty"`
	Attempt   uint32    `json:"attempt,omitempty"`
	Fence     uint64    `json:"fence,omitempty"`
	Outcome   string    `json:"outcome"`
	Detail    string    `json:"detail,omitempty"`
}

func (c *cli) release(ctx context.Context, name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	reason := fs.String("reason", "", "")
	force := fs.Bool("force", false, "")
	auditFile := fs.String("audit-file", "", "")
	key, code := c.oneKey(name, fs, args)
	if code != exitOK {
		return code
	}
	if strings.TrimSpace(*reason) == "" {
		return usageError(c.stderr, "release: --reason is required: say why the key is released (it goes into the audit line)")
	}
	if err := store.CheckKey(key); err != nil {
		return usageError(c.stderr, "release: "+err.Error())
	}
	a := audit{Action: "release", Key: c.redact(key), Reason: *reason, Force: *force, Operator: os.Getenv("USER"), Store: redactedURL(c.url)}
	e, err := c.in.Lookup(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		a.Outcome, a.Detail = "absent", "the store holds no record under this key: it is free"
		return c.writeAudit(a, *auditFile, exitOK)
	case err != nil:
		return c.fail(err)
	}
	a.Before, a.TokenHash, a.Attempt, a.Fence = e.State.String(), e.TokenHash, e.Attempt, e.Fence
	if !e.LockedUntil.IsZero() {
		a.LeaseEnd = e.LockedUntil.UTC().Format(time.RFC3339Nano)
	}
	switch e.State {
	case store.StateLapsed:
		a.Outcome, a.Detail = "already_free", fmt.Sprintf("the lease is over: the next Claim takes the key over as attempt %d (the record stays, for that count, until purged)", max(e.Attempt, 1)+1)
		return c.writeAudit(a, *auditFile, exitOK)
	case store.StateExpired:
		a.Outcome, a.Detail = "already_free", "the retention is over: the next Claim acquires the key"
		return c.writeAudit(a, *auditFile, exitOK)
	case store.StateCompleted:
		a.Outcome = "refused"
		if *force {
			a.Detail = "the store contract has no operation that deletes a completed record (Release never does), so --force cannot either; it stays until its retention ends, then purge removes it"
		} else {
			a.Detail = "the key is completed: retries replay its response; releasing it would let the work run again (--force is refused too: the store contract cannot delete a completed record)"
		}
		c.writeAudit(a, *auditFile, exitFailed)
		fmt.Fprintf(c.stderr, "idemctl: release: refused: %s\n", a.Detail)
		return exitFailed
	}
	// In progress: release with the holder's own token, read from the
	// store, then look again.
	r, err := c.s.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		a.Outcome, a.Detail = "already_free", "the lease ended or the key was released meanwhile"
		return c.writeAudit(a, *auditFile, exitOK)
	}
	if err != nil {
		return c.fail(err)
	}
	switch {
	case r.Status != store.StatusInProgress:
		a.Detail = "the key was completed meanwhile"
	case store.HashToken(r.Token) != e.TokenHash:
		// The lease lapsed and another holder, alive, took the key over
		// between the two reads: never release a holder not looked at.
		a.Detail = "the key changed hands meanwhile (now held by token " + store.HashToken(r.Token) + "); look again"
	}
	if a.Detail != "" {
		a.Outcome = "refused"
		c.writeAudit(a, *auditFile, exitFailed)
		fmt.Fprintf(c.stderr, "idemctl: release: refused: %s\n", a.Detail)
		return exitFailed
	}
	if err := c.s.Release(ctx, key, r.Token); err != nil {
		a.Outcome, a.Detail = "error", err.Error()
		c.writeAudit(a, *auditFile, exitFailed)
		return c.fail(err)
	}
	after, err := c.in.Lookup(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound), err == nil && after.State.Free():
		a.Outcome = "released"
	case err != nil:
		a.Outcome, a.Detail = "unknown", "released, but the check that followed failed: "+err.Error()
	case after.TokenHash != a.TokenHash && after.State == store.StateInProgress:
		a.Outcome, a.Detail = "released", "and claimed again since by token "+after.TokenHash
	case after.State == store.StateCompleted:
		a.Outcome, a.Detail = "not_released", "the holder completed the key first"
	default:
		a.Outcome, a.Detail = "not_released", "the key is still held by the same token"
	}
	code = exitOK
	if a.Outcome != "released" {
		code = exitFailed
	}
	code = c.writeAudit(a, *auditFile, code)
	if code == exitOK {
		fmt.Fprintf(c.stdout, "released %s (was held by token %s)\n", c.redact(key), a.TokenHash)
	} else {
		fmt.Fprintf(c.stderr, "idemctl: release: %s: %s\n", a.Outcome, a.Detail)
	}
	return code
}

// writeAudit appends a's JSON line to file, or to stderr, and returns code,
// or exitFailed when the line cannot be written.
func (c *cli) writeAudit(a audit, file string, code int) int {
	a.Time = c.now().UTC()
	line, err := json.Marshal(a)
	if err != nil {
		return c.fail(err)
	}
	line = append(line, '\n')
	if a.Outcome == "absent" || a.Outcome == "already_free" {
		fmt.Fprintf(c.stdout, "%s is already free: %s\n", a.Key, a.Detail)
	}
	if file == "" {
		_, err = c.stderr.Write(line)
	} else {
		var f *os.File
		if f, err = os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			_, err = f.Write(line)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		return c.fail(fmt.Errorf("audit line not written (the store was changed as it says): %w: %s", err, line))
	}
	return code
}

// redactedURL is the store URL without its password.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return store.RedactURL(u)
}

func (c *cli) purge(ctx context.Context, name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	pos, err := parse(fs, args)
	if err != nil || len(pos) > 0 {
		return usageError(c.stderr, "purge takes no arguments")
	}
	p, ok := c.s.(store.Purger)
	if !ok {
		fmt.Fprintln(c.stdout, "purged 0: this store deletes records itself when their lease or retention ends")
		return exitOK
	}
	n, err := p.Purge(ctx)
	if err != nil {
		fmt.Fprintf(c.stderr, "idemctl: purged %d before: %v\n", n, err)
		return exitFailed
	}
	fmt.Fprintf(c.stdout, "purged %d\n", n)
	return exitOK
}

func (c *cli) stats(ctx context.Context, name string, args []string) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	pos, err := parse(fs, args)
	if err != nil || len(pos) > 0 {
		return usageError(c.stderr, "stats: takes only --json")
	}
	n, err := c.in.Count(ctx)
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		type statsJSON struct {
			InProgress  int64      `json:"in_progress"`
			Lapsed      int64      `json:"lapsed"`
			Completed   int64      `json:"completed"`
			Expired     int64      `json:"expired"`
			OldestLease *time.Time `json:"oldest_lease_until,omitempty"`
		}
		out := statsJSON{InProgress: n.InProgress, Lapsed: n.Lapsed, Completed: n.Completed, Expired: n.Expired}
		if !n.OldestLease.IsZero() {
			t := n.OldestLease.UTC()
			out.OldestLease = &t
		}
		if err := json.NewEncoder(c.stdout).Encode(out); err != nil {
			return c.fail(err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "in_progress\t%d\nlapsed\t%d\ncompleted\t%d\nexpired\t%d\n", n.InProgress, n.Lapsed, n.Completed, n.Expired)
	if !n.OldestLease.IsZero() {
		fmt.Fprintf(tw, "oldest lease in flight ends\t%s (%s)\n", n.OldestLease.UTC().Format(time.RFC3339Nano), age(c.now(), n.OldestLease))
	}
	if err := tw.Flush(); err != nil {
		return c.fail(err)
	}
	return exitOK
}
