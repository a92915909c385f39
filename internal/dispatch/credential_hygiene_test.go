package dispatch_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// hygieneValues are a credential value for every field of a Set, with
// characters that JSON escapes, so that an echo in either form is caught.
type hygieneValues struct {
	header, user, password, bearer, clientID, clientSecret string
	certPEM, keyPEM                                        []byte
	caPEM                                                  []byte
}

// secrets lists what must never appear in a result, an error or a
// formatted Set: every secret value, the Basic credentials as sent, the
// access tokens, and the key's PEM body (a line of it is enough to leak).
func (v hygieneValues) secrets() []string {
	keyBody := strings.Split(string(v.keyPEM), "\n")[1]
	return []string{v.header, v.user, v.password, v.bearer, v.clientID, v.clientSecret,
		base64.StdEncoding.EncodeToString([]byte(v.user + ":" + v.password)), string(v.keyPEM), keyBody,
		"access-1", "access-2"}
}

// assertClean fails when text holds a secret of v, raw or JSON-escaped.
func (v hygieneValues) assertClean(t *testing.T, what, text string) {
	t.Helper()
	for _, s := range v.secrets() {
		q, _ := json.Marshal(s)
		if strings.Contains(text, s) || strings.Contains(text, string(q[1:len(q)-1])) {
			t.Errorf("%s contains the credential value %q:\n%s", what, s, text)
		}
	}
}

// assertResultClean checks every field of res and its formatted forms.
func (v hygieneValues) assertResultClean(t *testing.T, what string, res dispatch.Result) {
	t.Helper()
	if res.Err != nil {
		v.assertClean(t, what+": Err", res.Err.Error())
		v.assertClean(t, what+": Err formatted", fmt.Sprintf("%v %+v %#v %s", res.Err, res.Err, res.Err, res.Err))
	}
	v.assertClean(t, what+": Excerpt", string(res.Excerpt))
	v.assertClean(t, what+": Result formatted", fmt.Sprintf("%v %+v %#v", res, res, res))
}

// echo answers with every request header, raw and as JSON, and the Basic
// credentials decoded: the receiver hygiene must survive.
func echo(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusBadRequest)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range r.Header {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range names {
		_, _ = fmt.Fprintf(w, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
	}
	u, p, _ := r.BasicAuth()
	_, _ = fmt.Fprintf(w, "basic user=%s password=%s\n", u, p)
	_ = json.NewEncoder(w).Encode(r.Header)
	_ = json.NewEncoder(w).Encode(map[string]string{"user": u, "password": p})
}

// For every credential value of a Set: no field of a Result (an echoing
// receiver's excerpt, a failing token endpoint's error, a refusal), no
// formatted Set (fmt verbs and JSON) and no Check error contains it.
func TestCredentialValuesNeverInResultsOrErrors(t *testing.T) {
	serverCA, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	certPEM, keyPEM := clientCA.issue(t, "hookkeeper-client", false)
	v := hygieneValues{
		header:       `hdr-"value"<&>-secret`,
		user:         "user<&>-secret",
		password:     `pass"word<&>-secret`,
		bearer:       "bearer-<&>-secret",
		clientID:     "client-id-<&>-secret",
		clientSecret: `client-"secret"-<&>`,
		certPEM:      certPEM, keyPEM: keyPEM, caPEM: serverCA.pem,
	}
	ts := newTokenServer(t, v.clientID, v.clientSecret, 3600)
	rc := newTLSReceiver(t, serverCA, clientCA, echo)
	tlsSet := &credential.TLS{CertPEM: v.certPEM, KeyPEM: sensitive.Bytes(v.keyPEM), CAPEM: v.caPEM}
	headers := []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes(v.header)}}
	oauth := &credential.OAuth2{TokenURL: ts.URL + "/token", ClientID: sensitive.Bytes(v.clientID), ClientSecret: sensitive.Bytes(v.clientSecret)}
	sets := map[string]*credential.Set{
		"basic":  {Headers: headers, TLS: tlsSet, Basic: &credential.Basic{Username: sensitive.Bytes(v.user), Password: sensitive.Bytes(v.password)}},
		"bearer": {Headers: headers, TLS: tlsSet, Bearer: sensitive.Bytes(v.bearer)},
		"oauth2": {Headers: headers, TLS: tlsSet, OAuth2: oauth},
	}
	s := fixedSender()
	s.MaxExcerpt = 1 << 20
	for name, set := range sets {
		res := s.Send(context.Background(), credRequest(t, s, rc.URL, name, set))
		if res.StatusCode != http.StatusBadRequest || len(res.Excerpt) < 200 {
			t.Fatalf("%s: result %+v, want the echo", name, res)
		}
		if !strings.Contains(string(res.Excerpt), "[redacted]") || !strings.Contains(string(res.Excerpt), "Webhook-Id") {
			t.Errorf("%s: the excerpt is not the redacted echo:\n%s", name, res.Excerpt)
		}
		v.assertResultClean(t, name+" echoed", res)
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			v.assertClean(t, name+" formatted with "+verb, fmt.Sprintf(verb, set))
			v.assertClean(t, name+" formatted with "+verb, fmt.Sprintf(verb, *set))
		}
		js, err := json.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		v.assertClean(t, name+" as JSON", string(js))
	}

	// The excerpt cut in the middle of a value keeps no start of it.
	cut := newTLSReceiver(t, serverCA, clientCA, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
	})
	short := fixedSender()
	short.MaxExcerpt = len("auth=Bearer ") + 8
	res := short.Send(context.Background(), credRequest(t, short, cut.URL, "cut", sets["bearer"]))
	if got := string(res.Excerpt); got != "auth=Bearer [redacted]" {
		t.Errorf("cut excerpt %q, want the value's start redacted", got)
	}

	// A token endpoint that echoes the request (client secret included)
	// into its error answer.
	ts.setAnswer(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": id + " " + secret + " " + r.Header.Get("Authorization")})
		return true
	})
	res = s.Send(context.Background(), credRequest(t, s, rc.URL, "oauth2-refused", sets["oauth2"]))
	if res.Class != dispatch.NetworkError {
		t.Fatalf("result %+v, want the token endpoint's failure", res)
	}
	v.assertResultClean(t, "token endpoint refusal", res)

	// Refusals of sets that break a rule with a value in the offending
	// field, from Send, CheckCredentials and Check.
	bad := map[string]*credential.Set{
		"a header value with a control character": {Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes(v.header + "\x01")}}},
		"a header value with a space around":      {Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes(" " + v.header)}}},
		"a repeated credential header": {Headers: []credential.Header{{Name: "X-Api-Key", Value: sensitive.Bytes(v.header)},
			{Name: "x-api-key", Value: sensitive.Bytes(v.header)}}},
		"a username with a colon":             {Basic: &credential.Basic{Username: sensitive.Bytes(v.user + ":x"), Password: sensitive.Bytes(v.password)}},
		"a username with a control character": {Basic: &credential.Basic{Username: sensitive.Bytes(v.user + "\n"), Password: sensitive.Bytes(v.password)}},
		"a bearer with a newline":             {Bearer: sensitive.Bytes(v.bearer + "\r\n")},
		"two kinds of auth":                   {Bearer: sensitive.Bytes(v.bearer), Basic: &credential.Basic{Username: sensitive.Bytes(v.user), Password: sensitive.Bytes(v.password)}},
		"an Authorization header with auth":   {Bearer: sensitive.Bytes(v.bearer), Headers: []credential.Header{{Name: "Authorization", Value: sensitive.Bytes(v.header)}}},
		"a key of another certificate":        {TLS: &credential.TLS{CertPEM: serverCA.pem, KeyPEM: sensitive.Bytes(v.keyPEM)}},
		"a key that is not PEM":               {TLS: &credential.TLS{CertPEM: v.certPEM, KeyPEM: sensitive.Bytes(v.password)}},
		"a token URL with user information": {OAuth2: &credential.OAuth2{TokenURL: "https://" + v.clientID + ":" + v.clientSecret + "@auth.example/token",
			ClientID: sensitive.Bytes(v.clientID), ClientSecret: sensitive.Bytes(v.clientSecret)}},
		"an empty client secret": {OAuth2: &credential.OAuth2{TokenURL: "https://auth.example/token", ClientID: sensitive.Bytes(v.clientID)}},
	}
	for name, set := range bad {
		err := set.Check()
		if err == nil {
			t.Errorf("%s: Check accepted it", name)
			continue
		}
		v.assertClean(t, name+": Check", fmt.Sprintf("%v %+v %#v %s", err, err, err, err))
		v.assertClean(t, name+": CheckCredentials", fmt.Sprint(dispatch.CheckCredentials("https://receiver.example/", nil, set)))
		res := s.Send(context.Background(), credRequest(t, s, "https://127.0.0.1:1/", "bad", set))
		if res.Class != dispatch.InvalidRequest {
			t.Errorf("%s: result %+v, want InvalidRequest", name, res)
		}
		v.assertResultClean(t, name+": Send", res)
	}
}
