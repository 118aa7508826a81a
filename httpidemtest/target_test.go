package httpidemtest_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/httpidemtest"
)

// TestInvalidTarget: a target the suite cannot use is an error that says
// what to set, before any request.
func TestInvalidTarget(t *testing.T) {
	body := func() []byte { return []byte(`{"a":1}`) }
	other := func() []byte { return []byte(`{"a":2}`) }
	count := func(context.Context) (int, error) { return 0, nil }
	h := http.NotFoundHandler()
	cases := []struct {
		tg   httpidemtest.Target
		want string
	}{
		{httpidemtest.Target{Path: "/p", Body: body, OtherBody: other, Count: count}, "set Handler or URL"},
		{httpidemtest.Target{Handler: h, URL: "http://127.0.0.1:1", Path: "/p", Body: body, OtherBody: other, Count: count}, "only one"},
		{httpidemtest.Target{Handler: h, Path: "p", Body: body, OtherBody: other, Count: count}, "must start with /"},
		{httpidemtest.Target{Handler: h, Path: "/p", Body: body, Count: count}, "OtherBody are required"},
		{httpidemtest.Target{Handler: h, Path: "/p", Body: body, OtherBody: body, Count: count}, "the same bytes"},
		{httpidemtest.Target{Handler: h, Path: "/p", Body: body, OtherBody: other}, "set Count or CountPath"},
		{httpidemtest.Target{URL: "http://127.0.0.1:1/base", Path: "/p", Body: body, OtherBody: other, Count: count}, "has a path"},
		{httpidemtest.Target{URL: "ftp://127.0.0.1:1", Path: "/p", Body: body, OtherBody: other, Count: count}, "not an http"},
		{httpidemtest.Target{URL: "http://127.0.0.1:1", Path: "/p", Body: body, OtherBody: other, CountPath: "http://127.0.0.2/p"}, "talks only to the target"},
		{httpidemtest.Target{Handler: h, Path: "/p", Body: body, OtherBody: other, Count: count, Concurrency: 65}, "over 64"},
		{httpidemtest.Target{Handler: h, Path: "/p", Body: body, OtherBody: other, Count: count, MaxBody: -1}, "must not be negative"},
	}
	for _, c := range cases {
		_, err := httpidemtest.Check(t.Context(), c.tg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "httpidemtest: invalid target: ") {
			t.Errorf("Check(%+v) = %v, want an error with %q", c.tg, err, c.want)
		}
	}
	_, err := httpidemtest.Check(t.Context(), httpidemtest.Target{Handler: h, Path: "/p", Body: body, OtherBody: other, Count: count}, "nosuch/rule")
	if err == nil || !strings.Contains(err.Error(), `no rule "nosuch/rule"`) {
		t.Errorf("an unknown rule: %v", err)
	}
}
