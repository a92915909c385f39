package testenv_test

import (
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestRegisterDeliveryAPIRefusesAddresses: the route is an ExternalName
// for 127.0.0.1, so any other address is refused before kubectl runs (the
// kubectl path is not even a binary here).
func TestRegisterDeliveryAPIRefusesAddresses(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8443", "[::1]:8443", "localhost:8443", "10.0.0.1:8443", "127.0.0.1", ":8443"} {
		err := testenv.RegisterDeliveryAPI("/nonexistent/kubectl", "/nonexistent/kubeconfig", addr, []byte("ca"))
		if err == nil || !strings.Contains(err.Error(), addr) {
			t.Errorf("RegisterDeliveryAPI(%q): %v, want an error naming the address", addr, err)
		}
	}
}
