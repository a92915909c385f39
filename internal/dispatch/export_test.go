package dispatch

// TLSClients is how many HTTPS clients s keeps for TLS credentials.
func TLSClients(s *Sender) int {
	s.creds.mu.Lock()
	defer s.creds.mu.Unlock()
	return len(s.creds.tls)
}

// TokenWaiters is how many attempts of endpoint have waited for another
// attempt's token fetch.
func TokenWaiters(s *Sender, endpoint string) int {
	s.creds.mu.Lock()
	p := s.creds.byEndpoint[endpoint]
	s.creds.mu.Unlock()
	if p == nil || p.oauth == nil {
		return 0
	}
	p.oauth.mu.Lock()
	defer p.oauth.mu.Unlock()
	return p.oauth.waiters
}
