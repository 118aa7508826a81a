package store_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/store"
)

func TestClassify(t *testing.T) {
	now := time.Unix(1000, 0)
	live, over := now.Add(time.Second), now
	rec := func(fp string, st store.Status, tok store.Token, exp time.Time) store.Record {
		return store.Record{Fingerprint: fp, Status: st, Token: tok, ExpiresAt: exp}
	}
	for name, tc := range map[string]struct {
		r    store.Record
		want store.Finding
	}{
		"lapsed lease":                  {rec("fp", store.StatusInProgress, "other", over), store.Finding{Outcome: store.Acquired, Write: true, Lapsed: true}},
		"retention over, other request": {rec("x", store.StatusCompleted, "other", over), store.Finding{Outcome: store.Acquired, Write: true, Lapsed: true}},
		"mismatch while in progress":    {rec("x", store.StatusInProgress, "other", live), store.Finding{Outcome: store.Mismatch}},
		"mismatch by the same token":    {rec("x", store.StatusInProgress, "tok", live), store.Finding{Outcome: store.Mismatch}},
		"mismatch once completed":       {rec("x", store.StatusCompleted, "tok", live), store.Finding{Outcome: store.Mismatch}},
		"completed":                     {rec("fp", store.StatusCompleted, "other", live), store.Finding{Outcome: store.Completed}},
		"completed by this token":       {rec("fp", store.StatusCompleted, "tok", live), store.Finding{Outcome: store.Completed}},
		"own claim: renew":              {rec("fp", store.StatusInProgress, "tok", live), store.Finding{Outcome: store.Acquired, Write: true}},
		"another's claim":               {rec("fp", store.StatusInProgress, "other", live), store.Finding{Outcome: store.InProgress}},
	} {
		if got := store.Classify(tc.r, "fp", "tok", now); got != tc.want {
			t.Errorf("%s: Classify = %+v, want %+v", name, got, tc.want)
		}
	}
	// The zero now: a record the server found live is never lapsed.
	if f := store.Classify(rec("fp", store.StatusInProgress, "other", time.Unix(1, 0)), "fp", "tok", time.Time{}); f.Lapsed {
		t.Error("a record is lapsed at the zero time")
	}
}
