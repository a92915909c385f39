package publish

import (
	"strings"
	"testing"
)

// benchBodies are publish bodies of about 1 KiB: the load generator's
// (test/bench/load.go: one number and a 1,000-byte string) and one shaped
// like a real order, with nesting, arrays, escapes and unsorted keys.
var benchBodies = []struct{ name, body string }{
	{"load-1KiB", `{"type":"order.created","data":{"n":12345,"pad":"` + strings.Repeat("x", 1000) + `"}}`},
	{"order-1KiB", `{"type":"order.created","data":{"orderId":"ord_8f3a9c1e","customer":{"id":"cus_4411","email":"ana@example.com","name":"Ana \"A.\" Souza","tier":"gold"},` +
		`"lines":[` + strings.Repeat(`{"sku":"SKU-1001","title":"Caf\u00e9 beans <1kg> & grinder","qty":2,"unitPrice":12.5,"tags":["coffee","beans"]},`, 5) +
		`{"sku":"SKU-9","title":"Mug","qty":1,"unitPrice":8,"tags":[]}],` +
		`"totals":{"net":70.5,"tax":1.35e1,"gross":84},"paid":true,"coupon":null,"notes":"leave at door\nring twice"},` +
		`"reissueOf":"evt_01hzzzzzzzzzzzzzzzzzzzzzzz"}`},
}

// BenchmarkParsePublishBody measures validating and canonicalising one
// publish body and computing its idempotency hash.
func BenchmarkParsePublishBody(b *testing.B) {
	benchmarkParse(b, parseBody)
}

// benchmarkParse runs parse over every bench body.
func benchmarkParse(b *testing.B, parse func([]byte, int, []byte) (*canonicalBody, error)) {
	for _, bb := range benchBodies {
		body := []byte(bb.body)
		b.Run(bb.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, aerr := parse(body, DefaultMaxSecrets, nil); aerr != nil {
					b.Fatal(aerr)
				}
			}
		})
	}
}

// BenchmarkParsePublishBodyOracle measures the implementation canonjson
// replaced (oracle_test.go) on the same bodies, for a comparison within
// one run: this machine's speed varies with its other load.
func BenchmarkParsePublishBodyOracle(b *testing.B) {
	benchmarkParse(b, oldParsePublishBody)
}
