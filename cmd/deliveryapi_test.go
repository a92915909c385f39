package main

import (
	"strings"
	"testing"
)

func TestDeliveryAPIFlagsValidate(t *testing.T) {
	for _, o := range []deliveryAPIOptions{
		{addr: "0", selfSigned: true, certFile: "c"}, // disabled: nothing else matters
		{addr: ":8443", certFile: "c", keyFile: "k"},
		{addr: "127.0.0.1:8443", selfSigned: true},
	} {
		if err := o.validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for name, c := range map[string]struct {
		o    deliveryAPIOptions
		want string
	}{
		"no certificate":     {deliveryAPIOptions{addr: ":8443"}, "exactly one certificate source"},
		"two sources":        {deliveryAPIOptions{addr: ":8443", selfSigned: true, certFile: "c", keyFile: "k"}, "exactly one certificate source"},
		"cert without a key": {deliveryAPIOptions{addr: ":8443", certFile: "c"}, "go together"},
		"key without a cert": {deliveryAPIOptions{addr: ":8443", keyFile: "k"}, "go together"},
	} {
		err := c.o.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
