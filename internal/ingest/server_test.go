package ingest

import (
	"net/http"
	"testing"
)

func TestNewServerHasTimeouts(t *testing.T) {
	s := NewServer(":8443", http.NotFoundHandler())
	if s.Addr != ":8443" || s.Handler == nil || s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 ||
		s.WriteTimeout <= DefaultPublishTimeout || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Errorf("server = %+v", s)
	}
}
