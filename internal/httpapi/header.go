package httpapi

import "net/http"

// limitHeaderBytes refuses a request whose headers exceed limit bytes (see
// headerBytes) with a JSON 431 HeaderTooLarge, and passes any other to
// next. It is the API's own bound, below the server's MaxHeaderBytes, so
// that an oversized request still gets a coded JSON error.
func limitHeaderBytes(next http.Handler, limit int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > limit {
			setAnswerHeaders(w)
			writeError(w, newError(http.StatusRequestHeaderFieldsTooLarge, CodeHeaderTooLarge, "",
				"the request line and headers exceed the limit of %d bytes", limit))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headerBytes is the size of r's request line and headers as an HTTP/1.1
// client writes them ("Name: value" lines, CRLFs and the blank line that
// ends them), which is roughly what net/http counts against
// MaxHeaderBytes. net/http moves Host out of Header into r.Host, so it is
// counted from there. For HTTP/2 it is an estimate of the same order.
func headerBytes(r *http.Request) int {
	const crlf = len("\r\n")
	n := len(r.Method) + len(" ") + len(r.RequestURI) + len(" ") + len(r.Proto) + crlf
	if _, ok := r.Header["Host"]; !ok && r.Host != "" {
		n += len("Host: ") + len(r.Host) + crlf
	}
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + len(": ") + len(v) + crlf
		}
	}
	return n + crlf
}
