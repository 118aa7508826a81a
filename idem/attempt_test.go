package idem

import (
	"context"
	"errors"
	"testing"
	"time"
)

type valueKey struct{}

func TestAttemptCtxEndsAtDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), valueKey{}, "v")
	c := newAttempt(parent, 20*time.Millisecond)
	defer c.stop()
	if c.Err() != nil {
		t.Fatalf("Err before the deadline: %v", c.Err())
	}
	if c.Value(valueKey{}) != "v" {
		t.Fatal("the parent's value is lost")
	}
	if d, ok := c.Deadline(); !ok || d.IsZero() {
		t.Fatal("no deadline")
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", c.Err())
	}
	// A child context sees the end too.
	child, cancel := context.WithCancel(newAttempt(parent, time.Millisecond))
	defer cancel()
	<-child.Done()
}

func TestAttemptCtxErrWithoutDone(t *testing.T) {
	c := newAttempt(context.Background(), time.Millisecond)
	deadline, _ := c.Deadline()
	for time.Now().Before(deadline) {
		if c.Err() != nil && time.Now().Before(deadline) {
			t.Fatal("Err before the deadline")
		}
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v after the deadline, want DeadlineExceeded", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done open after Err reported the deadline")
	}
}

func TestAttemptCtxStop(t *testing.T) {
	c := newAttempt(context.Background(), time.Hour)
	done := c.Done()
	c.stop()
	<-done
	if !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v after stop, want Canceled", c.Err())
	}
	c.stop() // twice is fine
}
