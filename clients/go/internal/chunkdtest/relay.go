package chunkdtest

import (
	"net"
	"sync"
	"testing"
)

// Relay is a TCP relay on loopback in front of a server that holds a
// stream at a byte count of the test's choosing: once holdAfter bytes went
// from its clients to the server (over every connection), it passes no more
// bytes to the server and connects no new connection upstream until
// Release; what the server sends still reaches the client, and a connection
// the server closes is closed. So a test can act (kill the server, let a
// deadline pass) while a stream is certainly under way, however fast the
// client and the server are. The hold happens once.
type Relay struct {
	// Addr is the relay's address, for the client.
	Addr     string
	upstream string
	listener net.Listener
	held     chan struct{} // closed when the hold begins
	released chan struct{} // closed by Release

	mu      sync.Mutex
	left    int64 // bytes to the server before the hold; < 0: no hold (any more)
	conns   []net.Conn
	closing bool
	release sync.Once
	wg      sync.WaitGroup
}

// StartRelay starts a relay in front of upstream that holds after
// holdAfter bytes; it closes every connection when the test ends.
func StartRelay(t testing.TB, upstream string, holdAfter int64) *Relay {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Addr: l.Addr().String(), upstream: upstream, listener: l,
		held: make(chan struct{}), released: make(chan struct{}), left: holdAfter}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(r.close)
	return r
}

// Held is closed once the relay holds.
func (r *Relay) Held() <-chan struct{} { return r.held }

// Release ends the hold (or cancels it before it begins). Idempotent.
func (r *Relay) Release() { r.release.Do(func() { close(r.released) }) }

// gate waits while the relay holds.
func (r *Relay) gate() {
	select {
	case <-r.held:
		<-r.released
	default:
	}
}

// passable is how many of n bytes to the server go before the hold begins.
func (r *Relay) passable(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.released:
		r.left = -1
	default:
	}
	if r.left < 0 || int64(n) < r.left {
		if r.left >= 0 {
			r.left -= int64(n)
		}
		return n
	}
	passed := int(r.left)
	r.left = -1
	close(r.held)
	return passed
}

// track remembers c for close; false when the relay is closing.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing {
		return false
	}
	r.conns = append(r.conns, c)
	return true
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		client, err := r.listener.Accept()
		if err != nil {
			return
		}
		r.gate()
		server, err := net.Dial("tcp", r.upstream)
		if err != nil || !r.track(client) || !r.track(server) {
			client.Close() // the server is down: the client sees UNAVAILABLE
			if server != nil {
				server.Close()
			}
			continue
		}
		r.wg.Add(2)
		go r.pump(client, server, true)
		go r.pump(server, client, false)
	}
}

// pump copies from src to dst; toServer counts the bytes for the hold.
func (r *Relay) pump(src, dst net.Conn, toServer bool) {
	defer r.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		data := buf[:n]
		if toServer && n > 0 {
			r.gate()
			passed := r.passable(n)
			if _, werr := dst.Write(data[:passed]); werr != nil {
				break
			}
			data = data[passed:]
			r.gate()
		}
		if _, werr := dst.Write(data); werr != nil || err != nil {
			break
		}
	}
	if toServer {
		r.gate() // the client's end of stream is held too
	}
	if tcp, ok := dst.(*net.TCPConn); ok {
		_ = tcp.CloseWrite()
	}
}

// close ends the hold and every connection, and waits for the goroutines.
func (r *Relay) close() {
	r.Release()
	r.listener.Close()
	r.mu.Lock()
	r.closing = true
	conns := r.conns
	r.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	r.wg.Wait()
}
