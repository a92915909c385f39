package dispatch_test

import (
	"errors"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
)

func TestClassify(t *testing.T) {
	defaults := []string{"NetworkError", "Timeout", "408", "429", "5xx"} // the CRD's default
	netErr := errors.New("connection refused")
	tests := []struct {
		name    string
		res     dispatch.Result
		retryOn []string
		want    dispatch.Verdict
	}{
		{"200", dispatch.Result{StatusCode: 200}, nil, dispatch.Success},
		{"204", dispatch.Result{StatusCode: 204}, defaults, dispatch.Success},
		{"299", dispatch.Result{StatusCode: 299}, nil, dispatch.Success},
		{"410 with nothing listed", dispatch.Result{StatusCode: 410}, nil, dispatch.Gone},
		{"410 even when 4xx is listed", dispatch.Result{StatusCode: 410}, []string{"4xx", "410"}, dispatch.Gone},
		{"500 under 5xx", dispatch.Result{StatusCode: 500}, defaults, dispatch.Retry},
		{"503 under 5xx", dispatch.Result{StatusCode: 503}, defaults, dispatch.Retry},
		{"599 under 5xx", dispatch.Result{StatusCode: 599}, defaults, dispatch.Retry},
		{"500 unlisted", dispatch.Result{StatusCode: 500}, []string{"4xx", "NetworkError"}, dispatch.NonRetryable},
		{"502 as an exact code", dispatch.Result{StatusCode: 502}, []string{"502"}, dispatch.Retry},
		{"503 not matching another exact code", dispatch.Result{StatusCode: 503}, []string{"502"}, dispatch.NonRetryable},
		{"429 as an exact code", dispatch.Result{StatusCode: 429}, defaults, dispatch.Retry},
		{"408 as an exact code", dispatch.Result{StatusCode: 408}, defaults, dispatch.Retry},
		{"400 unlisted", dispatch.Result{StatusCode: 400}, defaults, dispatch.NonRetryable},
		{"404 under 4xx", dispatch.Result{StatusCode: 404}, []string{"4xx"}, dispatch.Retry},
		{"class names ignore case", dispatch.Result{StatusCode: 404}, []string{"4XX"}, dispatch.Retry},
		{"301 unlisted", dispatch.Result{StatusCode: 301}, defaults, dispatch.NonRetryable},
		{"307 under 3xx", dispatch.Result{StatusCode: 307}, []string{"3xx"}, dispatch.Retry},
		{"308 as an exact code", dispatch.Result{StatusCode: 308}, []string{"308"}, dispatch.Retry},
		{"101 unlisted", dispatch.Result{StatusCode: 101}, defaults, dispatch.NonRetryable},
		{"malformed entries match nothing", dispatch.Result{StatusCode: 500}, []string{"5x", "50", "5xxx", "x00", "", "0xx", "5XY"}, dispatch.NonRetryable},
		{"network error listed", dispatch.Result{Err: netErr, Class: dispatch.NetworkError}, defaults, dispatch.Retry},
		{"network error unlisted", dispatch.Result{Err: netErr, Class: dispatch.NetworkError}, []string{"5xx", "Timeout"}, dispatch.NonRetryable},
		{"network error is not a status class", dispatch.Result{Err: netErr, Class: dispatch.NetworkError}, []string{"5xx", "4xx"}, dispatch.NonRetryable},
		{"timeout listed", dispatch.Result{Err: netErr, Class: dispatch.Timeout}, []string{"timeout"}, dispatch.Retry},
		{"timeout unlisted", dispatch.Result{Err: netErr, Class: dispatch.Timeout}, []string{"NetworkError"}, dispatch.NonRetryable},
		{"invalid request is never retried", dispatch.Result{Err: netErr, Class: dispatch.InvalidRequest}, []string{"NetworkError", "Timeout", "InvalidRequest"}, dispatch.NonRetryable},
		{"a forbidden destination is never retried", dispatch.Result{Err: netErr, Class: dispatch.ForbiddenDestination}, []string{"NetworkError", "Timeout", "ForbiddenDestination"}, dispatch.NonRetryable},
		{"canceled is retried", dispatch.Result{Err: netErr, Class: dispatch.Canceled}, nil, dispatch.Retry},
		{"no status and no class counts as a network error", dispatch.Result{Err: netErr}, defaults, dispatch.Retry},
		{"no status and no class, unlisted", dispatch.Result{}, []string{"5xx"}, dispatch.NonRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dispatch.Classify(tt.res, tt.retryOn); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[dispatch.Verdict]string{dispatch.Success: "Success", dispatch.Retry: "Retry",
		dispatch.NonRetryable: "NonRetryable", dispatch.Gone: "Gone", 0: "Verdict(0)"} {
		if got := v.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(v), got, want)
		}
	}
}
