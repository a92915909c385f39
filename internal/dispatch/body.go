package dispatch

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// envelopeBuf is a pooled request body. The transport may read a request
// body after Client.Do returns and may ask for a second copy (GetBody) to
// resend on a fresh connection, so the buffer is reference-counted: Send
// holds one reference and every body handed out holds one until it is
// closed. The buffer is wiped and pooled when the last one is released.
type envelopeBuf struct {
	buf     bytes.Buffer
	refs    atomic.Int32
	getBody func() (io.ReadCloser, error) // cached method value
}

// maxPooled keeps rare huge envelopes from pinning memory in the pool.
const maxPooled = 256 << 10

var envelopePool = sync.Pool{New: func() any {
	e := new(envelopeBuf)
	e.getBody = e.newBody
	return e
}}

func getEnvelopeBuf() *envelopeBuf {
	e := envelopePool.Get().(*envelopeBuf)
	e.refs.Store(1)
	return e
}

// newBody returns a reader of the envelope. Bodies are never reused: a
// closed body stays closed, whatever happens to the buffer next.
func (e *envelopeBuf) newBody() (io.ReadCloser, error) {
	e.refs.Add(1)
	b := &body{owner: e}
	b.r.Reset(e.buf.Bytes())
	return b, nil
}

func (e *envelopeBuf) release() {
	if e.refs.Add(-1) != 0 {
		return
	}
	if e.buf.Cap() > maxPooled {
		return
	}
	clear(e.buf.Bytes()) // envelopes may carry secrets
	e.buf.Reset()
	envelopePool.Put(e)
}

// body reads an envelopeBuf. Read and Close exclude each other, so once
// Close returns no read of the buffer is in progress or can start.
type body struct {
	mu     sync.Mutex
	r      bytes.Reader
	owner  *envelopeBuf
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	return b.r.Read(p)
}

func (b *body) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.r.Reset(nil)
	owner := b.owner
	b.mu.Unlock()
	owner.release()
	return nil
}
