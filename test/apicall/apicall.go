// Package apicall sends requests to hookkeeper's HTTP API the way a
// producer or a tool does, for the suites that run the manager as a
// process.
package apicall

import (
	"io"
	"net/http"
	"strings"
)

// Do sends one request to base+path with token as bearer (none when
// empty), body as JSON (none when empty) and an Idempotency-Key (none when
// empty), and returns the status and the answer's body.
func Do(client *http.Client, base, token, method, path, body, idempotencyKey string) (int, []byte, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}
