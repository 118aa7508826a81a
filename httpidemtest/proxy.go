package httpidemtest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// dropProxy is a TCP proxy on loopback that forwards a request to the
// target, reads the target's whole answer, and then closes both connections
// without passing a byte of it on: the answer is lost after the server sent
// it, as when a connection breaks on the way back.
type dropProxy struct {
	ln     net.Listener
	target string // host:port
	wg     sync.WaitGroup

	mu   sync.Mutex
	seen *Exchange // the last answer the proxy read and dropped
	err  error     // why it read none
}

func newDropProxy(target string) (*dropProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &dropProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// client returns a client whose every connection goes through the proxy,
// one request per connection (so that net/http never retries by itself).
func (p *dropProxy) client(timeout time.Duration) *http.Client {
	var d net.Dialer
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return d.DialContext(ctx, "tcp", p.ln.Addr().String())
			},
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func (p *dropProxy) close() {
	p.ln.Close()
	p.wg.Wait()
}

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *dropProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		p.record(nil, err)
		return
	}
	defer server.Close()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		io.Copy(server, client) // the request; ends when either side closes
	}()
	_ = server.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(server), nil)
	if err != nil {
		p.record(nil, err)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		p.record(nil, err)
		return
	}
	p.record(&Exchange{Note: "the answer the proxy dropped", Status: resp.StatusCode, Header: resp.Header, Body: body}, nil)
	// Both deferred closes now cut the connections: the client gets nothing.
}

func (p *dropProxy) record(e *Exchange, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen, p.err = e, err
}

// dropped returns the answer the proxy read and dropped.
func (p *dropProxy) dropped() (Exchange, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.seen != nil:
		return *p.seen, nil
	case p.err != nil:
		return Exchange{}, p.err
	}
	return Exchange{}, errors.New("no connection reached the proxy")
}
