package keyer_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/keyer"
)

type keyValuer string

func (k keyValuer) LogValue() slog.Value { return slog.StringValue(string(k)) }

func TestRedactHandler(t *testing.T) {
	r, err := keyer.HashKeys(secret)
	if err != nil {
		t.Fatal(err)
	}
	const raw = "4:acme|5:alice|8:order-42"
	hashed := r(raw)
	var buf bytes.Buffer
	log := slog.New(keyer.RedactHandler(slog.NewTextHandler(&buf, nil), r))

	log.Info("top", "key", raw, "other", raw)
	log.With("key", raw).Info("with")
	log.Info("group", slog.Group("req", "key", raw))
	log.WithGroup("g").Info("withgroup", "key", raw)
	log.Info("valuer", "key", keyValuer(raw))
	log.Info("number", "key", 42)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for _, want := range []string{
		"msg=top key=" + hashed + " other=" + raw, // only attributes named key
		"msg=with key=" + hashed,
		"msg=group req.key=" + hashed,
		"msg=withgroup g.key=" + hashed,
		"msg=valuer key=" + hashed,
		"msg=number key=42",
	} {
		found := false
		for _, l := range lines {
			if strings.Contains(l, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line contains %q:\n%s", want, buf.String())
		}
	}
	if n := strings.Count(buf.String(), raw); n != 1 {
		t.Errorf("the raw key appears %d times, want once (the attribute not named key)", n)
	}
}

func TestRedactHandlerNamesAndDefault(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(keyer.RedactHandler(slog.NewTextHandler(&buf, nil), nil, "idempotency_key"))
	log.Info("m", "idempotency_key", "secret-key", "key", "plain")
	out := buf.String()
	if !strings.Contains(out, "idempotency_key="+keyer.DefaultRedactor()("secret-key")) || strings.Contains(out, "secret-key") {
		t.Errorf("named attribute not hashed with the process key: %s", out)
	}
	if !strings.Contains(out, "key=plain") {
		t.Errorf("an attribute not named was changed: %s", out)
	}
	buf.Reset()
	slog.New(keyer.RedactHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), keyer.OmitKeys())).Info("dropped", "key", "k")
	if buf.Len() != 0 {
		t.Errorf("Enabled not passed through: %s", buf.String())
	}
}
