// Package faultproxy is a TCP proxy for tests that breaks connections on
// purpose: it sits on loopback between a client and a server (PostgreSQL,
// Redis) and can cut, black-hole, delay or refuse connections, or lose the
// server's reply to a chosen request, at the moment a test chooses.
package faultproxy

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards connections from Addr to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	links     map[*link]struct{}
	blackhole bool
	refuse    bool
	delay     time.Duration
	loseReply []byte // a client request containing these bytes never gets its reply
	closed    bool
	wg        sync.WaitGroup
}

type link struct {
	client, server net.Conn
	once           sync.Once
	muted          atomic.Bool // drop everything the server sends from now on
}

func (l *link) close() {
	l.once.Do(func() {
		l.client.Close()
		l.server.Close()
	})
}

// New starts a proxy on 127.0.0.1 with a free port, forwarding to target.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port; point the client here.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, cuts every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

// CutAll closes every open connection at once, both sides, as a network
// failure or a killed peer would. New connections are still accepted.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Conns reports how many connections are open through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// SetBlackhole stops (true) or resumes (false) forwarding in both directions.
// Connections stay open and new ones are accepted, but bytes sent while the
// hole is on are dropped: the peers wait until their own timeouts.
func (p *Proxy) SetBlackhole(on bool) { p.set(func() { p.blackhole = on }) }

// SetRefuse makes the proxy close new connections as soon as they arrive.
func (p *Proxy) SetRefuse(on bool) { p.set(func() { p.refuse = on }) }

// SetDelay holds every chunk of data for d before forwarding it.
func (p *Proxy) SetDelay(d time.Duration) { p.set(func() { p.delay = d }) }

// LoseReplyTo arranges that the next time a client sends bytes containing
// marker, the request reaches the server but the connection is cut before
// any reply comes back: the server did the work, the client never learns it.
// It applies once; nil disarms it.
func (p *Proxy) LoseReplyTo(marker []byte) { p.set(func() { p.loseReply = marker }) }

func (p *Proxy) set(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, closed := p.refuse, p.closed
		p.mu.Unlock()
		if refuse || closed {
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		l := &link{client: c, server: s}
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(l, c, s, true)
		go p.pipe(l, s, c, false)
	}
}

// pipe copies src to dst until either side fails, applying the faults.
func (p *Proxy) pipe(l *link, src, dst net.Conn, fromClient bool) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			p.mu.Lock()
			hole, delay := p.blackhole, p.delay
			lose := fromClient && p.loseReply != nil && bytes.Contains(chunk, p.loseReply)
			if lose {
				p.loseReply = nil
			}
			p.mu.Unlock()
			if lose {
				l.muted.Store(true)
			}
			if delay > 0 {
				time.Sleep(delay)
			}
			if !hole && !(!fromClient && l.muted.Load()) {
				if _, werr := dst.Write(chunk); werr != nil {
					return
				}
			}
			if lose {
				// The request went to the server; its reply is muted. Give
				// the server a moment to act on it, then cut the link.
				time.Sleep(200 * time.Millisecond)
				return
			}
		}
		if err != nil {
			return // EOF, a reset or a cut: either way the link is done
		}
	}
}
