package faultproxy

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// echoServer answers each line with "ok <line>" and counts what it received.
func echoServer(t *testing.T) (addr string, got chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					got <- strings.TrimSpace(line)
					if _, err := c.Write([]byte("ok " + line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), got
}

func dial(t *testing.T, p *Proxy) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string) (string, error) {
	c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	return strings.TrimSpace(line), err
}

func newProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestForwards(t *testing.T) {
	addr, _ := echoServer(t)
	p := newProxy(t, addr)
	c, r := dial(t, p)
	if got, err := roundTrip(c, r, "hello"); err != nil || got != "ok hello" {
		t.Fatalf("round trip = %q, %v", got, err)
	}
}

func TestCutAll(t *testing.T) {
	addr, _ := echoServer(t)
	p := newProxy(t, addr)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, "one"); err != nil {
		t.Fatal(err)
	}
	p.CutAll()
	if _, err := roundTrip(c, r, "two"); err == nil {
		t.Fatal("round trip succeeded on a cut connection")
	}
	c2, r2 := dial(t, p)
	if got, err := roundTrip(c2, r2, "three"); err != nil || got != "ok three" {
		t.Fatalf("new connection after CutAll: %q, %v", got, err)
	}
}

func TestBlackholeAndRefuse(t *testing.T) {
	addr, got := echoServer(t)
	p := newProxy(t, addr)
	c, r := dial(t, p)
	p.SetBlackhole(true)
	if _, err := roundTrip(c, r, "lost"); err == nil {
		t.Fatal("got a reply through a black hole")
	}
	select {
	case m := <-got:
		t.Fatalf("server received %q through a black hole", m)
	default:
	}
	p.SetBlackhole(false)
	p.SetRefuse(true)
	c2, r2 := dial(t, p)
	if _, err := roundTrip(c2, r2, "refused"); err == nil {
		t.Fatal("a refused connection answered")
	}
}

func TestLoseReplyTo(t *testing.T) {
	addr, got := echoServer(t)
	p := newProxy(t, addr)
	c, r := dial(t, p)
	p.LoseReplyTo([]byte("COMMIT"))
	if _, err := roundTrip(c, r, "COMMIT"); err == nil {
		t.Fatal("the reply to COMMIT arrived; it should be lost")
	}
	select {
	case m := <-got:
		if m != "COMMIT" {
			t.Fatalf("server received %q", m)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the request never reached the server")
	}
	c2, r2 := dial(t, p)
	if got, err := roundTrip(c2, r2, "COMMIT"); err != nil || got != "ok COMMIT" {
		t.Fatalf("LoseReplyTo applied twice: %q, %v", got, err)
	}
}

func TestDelay(t *testing.T) {
	addr, _ := echoServer(t)
	p := newProxy(t, addr)
	p.SetDelay(300 * time.Millisecond)
	c, r := dial(t, p)
	if _, err := roundTrip(c, r, "slow"); err == nil {
		t.Fatal("a reply delayed 600ms arrived within the 500ms deadline")
	}
}
