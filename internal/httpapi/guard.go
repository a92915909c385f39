package httpapi

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// guard is the outermost handler of a Server. For each request it
//   - marks the connection as serving a request, so that the connection
//     cap does not evict it (see connLimiter);
//   - reserves the request's body in the memory budget for bodies in
//     progress, answering 503 Unavailable at once when the budget is spent;
//   - ends the connection when the answer goes out before the body was read
//     (a 401, a 413, any refusal): otherwise net/http would keep it to read
//     the rest of the body, holding the connection until the read timeout
//     when the client stalls.
type guard struct {
	next    http.Handler
	bodies  *byteBudget
	maxBody int64
	metrics *serverMetrics
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if lc := requestConn(r.Context()); lc != nil {
		lc.l.serving(lc, true)
		defer lc.l.serving(lc, false)
	}
	body := &trackedBody{ReadCloser: r.Body, done: r.ContentLength == 0 || r.Body == http.NoBody}
	cw := &closeUnread{ResponseWriter: w, body: body}
	if !body.done {
		n := bodyReservation(r.ContentLength, g.maxBody)
		if !g.bodies.tryAcquire(n) {
			g.metrics.requestRefused(refuseBodies)
			setAnswerHeaders(cw)
			cw.Header().Set("Retry-After", "1")
			writeError(cw, newError(http.StatusServiceUnavailable, CodeUnavailable, "",
				"the server is handling as many request bodies as it has memory for; retry shortly"))
			g.endUnread(cw)
			return
		}
		g.metrics.bodyBytesReserved(g.bodies.inUse())
		defer func() {
			g.bodies.release(n)
			g.metrics.bodyBytesReserved(g.bodies.inUse())
		}()
		r.Body = body
	}
	g.next.ServeHTTP(cw, r)
	g.endUnread(cw)
}

// endUnread makes net/http give up on the rest of an unread body at once
// (its read of the remainder fails), so that the connection closes as soon
// as the answer is out.
func (g *guard) endUnread(cw *closeUnread) {
	if cw.closing {
		_ = http.NewResponseController(cw.ResponseWriter).SetReadDeadline(time.Now())
	}
}

// bodyReservation is what a body of contentLength bytes (-1: unknown, as
// when chunked) reserves: its size, or the most the API reads of it.
func bodyReservation(contentLength, maxBody int64) int64 {
	if contentLength < 0 || contentLength > maxBody {
		return maxBody
	}
	return contentLength
}

// trackedBody records whether a request body was read to its end.
type trackedBody struct {
	io.ReadCloser
	done bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done = true
	}
	return n, err
}

// closeUnread adds Connection: close to an answer written before the
// request's body was read to its end.
type closeUnread struct {
	http.ResponseWriter
	body    *trackedBody
	wrote   bool
	closing bool
}

func (w *closeUnread) WriteHeader(code int) {
	if !w.wrote && code >= http.StatusOK {
		w.wrote = true
		if !w.body.done {
			w.Header().Set("Connection", "close")
			w.closing = true
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnread) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// byteBudget is a semaphore counted in bytes that never waits: what does
// not fit is refused. used mirrors what is held, for the gauge (a
// semaphore does not tell).
type byteBudget struct {
	sem  *semaphore.Weighted
	used atomic.Int64
}

func newByteBudget(maxBytes int64) *byteBudget {
	return &byteBudget{sem: semaphore.NewWeighted(maxBytes)}
}

func (b *byteBudget) tryAcquire(n int64) bool {
	if !b.sem.TryAcquire(n) {
		return false
	}
	b.used.Add(n)
	return true
}

func (b *byteBudget) release(n int64) {
	b.used.Add(-n)
	b.sem.Release(n)
}

func (b *byteBudget) inUse() int64 { return b.used.Load() }
