package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// object renders a manifest of kind with the given spec (YAML, indented by
// two spaces) and decodes it the way kubectl would send it.
func object(kind, name, spec string) *unstructured.Unstructured {
	manifest := fmt.Sprintf("apiVersion: hookkeeper.dev/v1alpha1\nkind: %s\nmetadata:\n  name: %s\nspec:\n%s", kind, name, spec)
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal([]byte(manifest), &u.Object)).To(Succeed(), manifest)
	return u
}

// newNamespace creates a namespace of its own for one spec.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

var _ = Describe("the hookkeeper.dev CRDs", func() {
	It("installs all four kinds with a status subresource in the hookkeeper category", func() {
		for _, kind := range []string{"RetryPolicy", "WebhookEndpoint", "DeliveryRecovery", "WebhookEventType"} {
			mapping, err := k8sClient.RESTMapper().RESTMapping(hookv1.GroupVersion.WithKind(kind).GroupKind(), "v1alpha1")
			Expect(err).NotTo(HaveOccurred(), kind)
			Expect(mapping.Scope.Name()).To(BeEquivalentTo("namespace"), kind)
		}
	})

	It("accepts every sample in config/samples", func() {
		ns := newNamespace()
		files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(files)).To(BeNumerically(">=", 7))
		for _, f := range files {
			data, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal(data, &u.Object)).To(Succeed(), f)
			u.SetNamespace(ns)
			Expect(k8sClient.Create(ctx, u)).To(Succeed(), "sample %s", filepath.Base(f))
		}
	})

	It("fills the defaults a user expects", func() {
		ns := newNamespace()
		p := object("RetryPolicy", "defaults", `
  backoff:
    initialDelay: 5s
  horizon:
    maxAttempts: 5
  replayWindow: 24h
`)
		p.SetNamespace(ns)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		var got hookv1.RetryPolicy
		Expect(k8sClient.Get(ctx, keyOf(p), &got)).To(Succeed())
		Expect(got.Spec.Backoff.Strategy).To(Equal(hookv1.BackoffExponential))
		Expect(*got.Spec.Backoff.JitterPercent).To(BeEquivalentTo(10))
		Expect(got.Spec.AttemptTimeout.Duration.String()).To(Equal("30s"))
		Expect(got.Spec.RetryAfterCap.Duration.String()).To(Equal("1h0m0s"))
		Expect(got.Spec.RetryOn).To(ConsistOf(hookv1.RetryClass("NetworkError"), hookv1.RetryClass("Timeout"), hookv1.RetryClass("408"), hookv1.RetryClass("429"), hookv1.RetryClass("5xx")))
		Expect(got.Spec.Retention.SecretGracePeriod.Duration).To(BeZero())
		Expect(got.Spec.Retention.Payloads.Duration.String()).To(Equal("168h0m0s"))
		Expect(got.Spec.Retention.Evidence.Duration.String()).To(Equal("720h0m0s"))
		// The circuit breaker's defaults are the engine's
		// (ledger.DefaultBreakerPolicy); goneProbeInterval stays absent: no
		// automatic probe after a 410 Gone.
		cb := got.Spec.CircuitBreaker
		Expect(cb).NotTo(BeNil())
		Expect(cb.Disabled).To(BeFalse())
		Expect(*cb.Failures).To(BeEquivalentTo(10))
		Expect(cb.MinDuration.Duration.String()).To(Equal("1m0s"))
		Expect(cb.ProbeInterval.Duration.String()).To(Equal("30s"))
		Expect(cb.MaxProbeInterval.Duration.String()).To(Equal("10m0s"))
		Expect(cb.GoneProbeInterval).To(BeNil())
		Expect(cb.Ramp.Duration.String()).To(Equal("1m0s"))

		e := object("WebhookEndpoint", "defaults", `
  url: https://example.com/hooks
  eventTypes: ["order.*"]
`)
		e.SetNamespace(ns)
		Expect(k8sClient.Create(ctx, e)).To(Succeed())
		var ep hookv1.WebhookEndpoint
		Expect(k8sClient.Get(ctx, keyOf(e), &ep)).To(Succeed())
		Expect(ep.Spec.Acknowledgement.Mode).To(Equal(hookv1.AcknowledgementResponse))
		Expect(*ep.Spec.MaxInFlight).To(BeEquivalentTo(10))
		Expect(ep.Spec.SigningRotationGracePeriod.Duration.String()).To(Equal("24h0m0s"))

		r := object("DeliveryRecovery", "defaults", `
  endpointRef: {name: defaults}
  action: Dismiss
`)
		r.SetNamespace(ns)
		Expect(k8sClient.Create(ctx, r)).To(Succeed())
		var rec hookv1.DeliveryRecovery
		Expect(k8sClient.Get(ctx, keyOf(r), &rec)).To(Succeed())
		Expect(*rec.Spec.Limit).To(BeEquivalentTo(100))

		rp := object("DeliveryRecovery", "replay-defaults", `
  endpointRef: {name: defaults}
  action: Replay
  replay: {since: "2026-12-01T09:00:00Z", eventTypes: ["order.*"]}
`)
		rp.SetNamespace(ns)
		Expect(k8sClient.Create(ctx, rp)).To(Succeed())
		Expect(k8sClient.Get(ctx, keyOf(rp), &rec)).To(Succeed())
		Expect(rec.Spec.Replay.OnUnreplayable).To(Equal(hookv1.ReplayFallbackRefuse))
		Expect(rec.Spec.Replay.Until).To(BeNil())
	})

	It("keeps a DeliveryRecovery's spec immutable but lets its status change", func() {
		ns := newNamespace()
		r := object("DeliveryRecovery", "once", `
  endpointRef: {name: n8n-ingress}
  action: Retry
`)
		r.SetNamespace(ns)
		Expect(k8sClient.Create(ctx, r)).To(Succeed())

		var rec hookv1.DeliveryRecovery
		Expect(k8sClient.Get(ctx, keyOf(r), &rec)).To(Succeed())
		rec.Spec.Action = hookv1.RecoveryModeReissue
		err := k8sClient.Update(ctx, &rec)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "update error: %v", err)
		Expect(err.Error()).To(ContainSubstring("spec: Invalid value"))
		Expect(err.Error()).To(ContainSubstring("spec is immutable: a DeliveryRecovery runs once; create a new one to recover again"))

		Expect(k8sClient.Get(ctx, keyOf(r), &rec)).To(Succeed())
		rec.Status.Counts.Matched = 3
		Expect(k8sClient.Status().Update(ctx, &rec)).To(Succeed())
	})

	DescribeTable("refuses an invalid manifest with the field and the rule",
		func(kind, spec, field, message string) {
			u := object(kind, "invalid", spec)
			u.SetNamespace("default")
			err := k8sClient.Create(ctx, u)
			Expect(err).To(HaveOccurred(), "the API server accepted:\n%s", spec)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want 422 Invalid, got %v", err)
			msg := err.Error()
			Expect(msg).To(ContainSubstring(field), "the error does not name the field")
			Expect(msg).To(ContainSubstring(message), "the error does not state the rule")
		},
		// RetryPolicy: the horizon.
		Entry("a horizon without any bound", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {}
  replayWindow: 24h
`, "spec.horizon", "horizon needs maxAttempts, maxAge, or both"),
		Entry("maxAttempts of zero", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 0}
  replayWindow: 24h
`, "spec.horizon.maxAttempts", "should be greater than or equal to 1"),
		Entry("maxAttempts above 1000", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 5000}
  replayWindow: 24h
`, "spec.horizon.maxAttempts", "should be less than or equal to 1000"),
		Entry("a zero maxAge", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAge: 0s}
  replayWindow: 24h
`, "spec.horizon.maxAge", "maxAge must be greater than zero"),
		// RetryPolicy: backoff.
		Entry("an unknown strategy", "RetryPolicy", `
  backoff: {strategy: Random, initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.strategy", `Unsupported value: "Random"`),
		Entry("strategy Schedule without a schedule", "RetryPolicy", `
  backoff: {strategy: Schedule}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "schedule is required when strategy is Schedule"),
		Entry("a schedule with strategy Exponential", "RetryPolicy", `
  backoff: {strategy: Exponential, initialDelay: 5s, schedule: [5s, 1m]}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "schedule is only allowed when strategy is Schedule"),
		Entry("a zero delay in the schedule", "RetryPolicy", `
  backoff: {strategy: Schedule, schedule: [5s, 0s]}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.schedule", "every schedule delay must be greater than zero"),
		Entry("a factor with strategy Linear", "RetryPolicy", `
  backoff: {strategy: Linear, initialDelay: 5s, factor: "2"}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "factor is only allowed when strategy is Exponential"),
		Entry("a factor of 1, which never grows", "RetryPolicy", `
  backoff: {strategy: Exponential, initialDelay: 5s, factor: "1"}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.factor", "factor must be greater than 1 and at most 10"),
		Entry("a factor above 10", "RetryPolicy", `
  backoff: {strategy: Exponential, initialDelay: 5s, factor: "11"}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.factor", "factor must be greater than 1 and at most 10"),
		Entry("a factor that is not a decimal", "RetryPolicy", `
  backoff: {strategy: Exponential, initialDelay: 5s, factor: "two"}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.factor", "should match"),
		Entry("Fixed without an initialDelay", "RetryPolicy", `
  backoff: {strategy: Fixed}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "initialDelay is required for strategies Exponential, Linear and Fixed"),
		Entry("an initialDelay with strategy Schedule", "RetryPolicy", `
  backoff: {strategy: Schedule, initialDelay: 5s, schedule: [5s]}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "initialDelay is not used by strategy Schedule"),
		Entry("an initialDelay that is not a Go duration", "RetryPolicy", `
  backoff: {initialDelay: 5 seconds}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.initialDelay", "should match"),
		Entry("a maxDelay shorter than the initialDelay", "RetryPolicy", `
  backoff: {strategy: Exponential, initialDelay: 1m, maxDelay: 10s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "maxDelay must be at least initialDelay"),
		Entry("a maxDelay with strategy Fixed", "RetryPolicy", `
  backoff: {strategy: Fixed, initialDelay: 5s, maxDelay: 1m}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff", "maxDelay is only allowed when strategy is Exponential or Linear"),
		Entry("jitter above 100 percent", "RetryPolicy", `
  backoff: {initialDelay: 5s, jitterPercent: 150}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
`, "spec.backoff.jitterPercent", "should be less than or equal to 100"),
		// RetryPolicy: timeouts, retry classes, replay and retention.
		Entry("an attemptTimeout above 15m", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  attemptTimeout: 30m
  replayWindow: 24h
`, "spec.attemptTimeout", "attemptTimeout must be between 1s and 15m"),
		Entry("an unknown retry class", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  retryOn: ["6xx"]
  replayWindow: 24h
`, "spec.retryOn[0]", "should match"),
		Entry("no replayWindow", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
`, "spec.replayWindow", "Required value"),
		Entry("an unbounded replayWindow", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 10000h
  retention: {evidence: 20000h}
`, "spec.replayWindow", "replayWindow must be greater than zero and at most 8760h"),
		Entry("a replayWindow shorter than the horizon's maxAge", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAge: 48h}
  replayWindow: 24h
`, "spec", "replayWindow must be at least horizon.maxAge"),
		Entry("evidence retention shorter than the replayWindow", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 168h
  retention: {evidence: 72h, payloads: 24h}
`, "spec", "retention.evidence must be at least replayWindow"),
		Entry("a replayWindow beyond the default evidence retention", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 1000h
`, "spec", "retention.evidence must be at least replayWindow"),
		Entry("payloads kept longer than their evidence", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  retention: {payloads: 2000h, evidence: 720h}
`, "spec.retention", "retention.payloads must not be longer than retention.evidence"),
		Entry("secrets kept longer than a week", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  retention: {secretGracePeriod: 200h}
`, "spec.retention.secretGracePeriod", "secretGracePeriod must be at most 168h"),
		Entry("a retry budget without a ratio", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  retryBudget: {minRetriesPerMinute: 5}
`, "spec.retryBudget.ratioPercent", "Required value"),
		// RetryPolicy: the circuit breaker.
		Entry("a breaker that opens on no failure", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  circuitBreaker: {failures: 0}
`, "spec.circuitBreaker.failures", "should be greater than or equal to 1"),
		Entry("a probeInterval below a second", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  circuitBreaker: {probeInterval: 100ms}
`, "spec.circuitBreaker.probeInterval", "circuitBreaker.probeInterval must be between 1s and 24h"),
		Entry("a probeInterval above the default maxProbeInterval", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  circuitBreaker: {probeInterval: 20m}
`, "spec.circuitBreaker.maxProbeInterval", "circuitBreaker.maxProbeInterval must be at least circuitBreaker.probeInterval"),
		Entry("a maxProbeInterval below the probeInterval", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  circuitBreaker: {probeInterval: 1m, maxProbeInterval: 30s}
`, "spec.circuitBreaker.maxProbeInterval", "circuitBreaker.maxProbeInterval must be at least circuitBreaker.probeInterval"),
		Entry("a ramp over an hour", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  circuitBreaker: {ramp: 2h}
`, "spec.circuitBreaker.ramp", "circuitBreaker.ramp must be at most 1h"),
		Entry("a goneProbeInterval that is not a duration", "RetryPolicy", `
  backoff: {initialDelay: 5s}
  horizon: {maxAttempts: 3}
  replayWindow: 24h
  circuitBreaker: {goneProbeInterval: never}
`, "spec.circuitBreaker.goneProbeInterval", "should match"),
		// WebhookEndpoint.
		Entry("an owner with spaces", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  owner: payments team
`, "spec.owner", "should match"),
		Entry("an owner ending with punctuation", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  owner: team-
`, "spec.owner", "should match"),
		Entry("an owner longer than 63 characters", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  owner: a123456789b123456789c123456789d123456789e123456789f123456789g1234
`, "spec.owner", "may not be more than 63"),
		Entry("an empty owner", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  owner: ""
`, "spec.owner", "should be at least 1"),
		Entry("a url with another scheme", "WebhookEndpoint", `
  url: ftp://example.com/hooks
  eventTypes: ["*"]
`, "spec.url", "url must be an absolute http or https URL"),
		Entry("a url that is not a URL", "WebhookEndpoint", `
  url: not a url
  eventTypes: ["*"]
`, "spec.url", "url must be an absolute http or https URL"),
		Entry("a url with user information", "WebhookEndpoint", `
  url: https://admin:hunter2@example.com/hooks
  eventTypes: ["*"]
`, "spec.url", "url must not contain user information"),
		Entry("a url with a fragment", "WebhookEndpoint", `
  url: https://example.com/hooks#top
  eventTypes: ["*"]
`, "spec.url", "url must not contain a fragment"),
		Entry("no event types", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: []
`, "spec.eventTypes", "should have at least 1 items"),
		Entry("a wildcard in the middle of an event type", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["order.*.created"]
`, "spec.eventTypes[0]", "should match"),
		Entry("an endpoint that is its own dead letter", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  deadLetterRef: {name: invalid}
`, "Invalid value", "an endpoint cannot be its own dead-letter destination"),
		Entry("a static header that overrides the signature", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  headers: [{name: Webhook-Signature, value: forged}]
`, "spec.headers[0]", "headers must not set a header hookkeeper or the HTTP stack sets (webhook-id, webhook-timestamp, webhook-signature"),
		Entry("a header value with a line break", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  headers: [{name: X-Tenant, value: "acme\r\nX-Evil: 1"}]
`, "spec.headers[0].value", "header values must not contain control characters other than tab"),
		Entry("a header with both a value and valueFrom", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  headers: [{name: X-Api-Key, value: inline, valueFrom: {secretKeyRef: {name: creds, key: api-key}}}]
`, "spec.headers[0]", "a header sets value or valueFrom, not both"),
		Entry("a header from a Secret without a key", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  headers: [{name: X-Api-Key, valueFrom: {secretKeyRef: {name: creds}}}]
`, "spec.headers[0].valueFrom.secretKeyRef.key", "Required value"),
		Entry("a reserved header from a Secret", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  headers: [{name: webhook-id, valueFrom: {secretKeyRef: {name: creds, key: id}}}]
`, "spec.headers[0]", "headers must not set a header hookkeeper or the HTTP stack sets"),
		Entry("auth with two schemes", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  auth:
    basic: {secretRef: {name: basic}}
    bearer: {tokenSecretRef: {name: token, key: token}}
`, "spec.auth", "auth sets exactly one of basic, bearer and oauth2"),
		Entry("auth with no scheme", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  auth: {}
`, "spec.auth", "auth sets exactly one of basic, bearer and oauth2"),
		Entry("an Authorization header beside auth", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  headers: [{name: authorization, valueFrom: {secretKeyRef: {name: creds, key: auth}}}]
  auth: {bearer: {tokenSecretRef: {name: token, key: token}}}
`, "spec", "headers must not set Authorization when auth is set"),
		Entry("an OAuth2 token URL that is not a URL", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  auth:
    oauth2:
      tokenURL: auth.example.com/token
      clientIDRef: {name: oauth, key: id}
      clientSecretRef: {name: oauth, key: secret}
`, "spec.auth.oauth2.tokenURL", "tokenURL must be an absolute http or https URL with a host"),
		Entry("an OAuth2 token URL with user information", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  auth:
    oauth2:
      tokenURL: https://client:secret@auth.example.com/token
      clientIDRef: {name: oauth, key: id}
      clientSecretRef: {name: oauth, key: secret}
`, "spec.auth.oauth2.tokenURL", "tokenURL must not contain user information"),
		Entry("an OAuth2 client secret in endpointParams", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  auth:
    oauth2:
      tokenURL: https://auth.example.com/token
      clientIDRef: {name: oauth, key: id}
      clientSecretRef: {name: oauth, key: secret}
      endpointParams: {client_secret: inline}
`, "spec.auth.oauth2.endpointParams", "endpointParams must not set grant_type, client_id, client_secret"),
		Entry("tls on an http url", "WebhookEndpoint", `
  url: http://example.com/hooks
  eventTypes: ["*"]
  tls: {clientCertificateSecretRef: {name: client-tls}}
`, "spec", "tls only applies to an https url"),
		Entry("tls without a certificate or a CA", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  tls: {}
`, "spec.tls", "tls sets clientCertificateSecretRef, caBundle or both"),
		Entry("a CA bundle from both a ConfigMap and a Secret", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  tls:
    caBundle:
      configMapKeyRef: {name: ca, key: ca.crt}
      secretKeyRef: {name: ca, key: ca.crt}
`, "spec.tls.caBundle", "caBundle sets exactly one of configMapKeyRef and secretKeyRef"),
		Entry("includeSystemRoots without a CA bundle", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  tls: {clientCertificateSecretRef: {name: client-tls}, includeSystemRoots: true}
`, "spec.tls", "tls.includeSystemRoots only applies with tls.caBundle"),
		Entry("an empty filter", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  filter: ""
`, "spec.filter", "should be at least 1 chars long"),
		Entry("an acknowledgement timeout in Response mode", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  acknowledgement: {mode: Response, timeout: 5m}
`, "spec.acknowledgement", "acknowledgement.timeout only applies to mode Callback"),
		Entry("an unknown acknowledgement mode", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  acknowledgement: {mode: Polling}
`, "spec.acknowledgement.mode", `Unsupported value: "Polling"`),
		Entry("a rate-limit burst of zero", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  rateLimit: {perSecond: 50, burst: 0}
`, "spec.rateLimit.burst", "should be greater than or equal to 1"),
		Entry("maxInFlight of zero", "WebhookEndpoint", `
  url: https://example.com/hooks
  eventTypes: ["*"]
  maxInFlight: 0
`, "spec.maxInFlight", "should be greater than or equal to 1"),
		// DeliveryRecovery.
		Entry("a recovery without an action", "DeliveryRecovery", `
  endpointRef: {name: n8n-ingress}
`, "spec.action", "Required value"),
		Entry("an unknown recovery action", "DeliveryRecovery", `
  endpointRef: {name: n8n-ingress}
  action: Resend
`, "spec.action", `Unsupported value: "Resend"`),
		Entry("a Replay without a replay block", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Replay
`, "spec", "replay is required with action Replay, and only allowed with it"),
		Entry("a replay block with another action", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Retry
  replay: {since: "2026-12-01T09:00:00Z", eventTypes: ["order.*"]}
`, "spec", "replay is required with action Replay, and only allowed with it"),
		Entry("a Replay with a selector", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Replay
  selector: {eventTypes: ["order.*"]}
  replay: {since: "2026-12-01T09:00:00Z", eventTypes: ["order.*"]}
`, "spec", "selector selects exhausted deliveries: a Replay selects events with replay instead"),
		Entry("a replay window that ends before it starts", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Replay
  replay: {since: "2026-12-01T09:00:00Z", until: "2026-12-01T09:00:00Z", eventTypes: ["order.*"]}
`, "spec.replay", "replay.since must be earlier than replay.until"),
		Entry("a replay without event types", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Replay
  replay: {since: "2026-12-01T09:00:00Z", eventTypes: []}
`, "spec.replay.eventTypes", "should have at least 1 items"),
		Entry("a replay without since", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Replay
  replay: {eventTypes: ["order.*"]}
`, "spec.replay.since", "Required value"),
		Entry("an unknown replay fallback", "DeliveryRecovery", `
  endpointRef: {name: billing}
  action: Replay
  replay: {since: "2026-12-01T09:00:00Z", eventTypes: ["order.*"], onUnreplayable: Auto}
`, "spec.replay.onUnreplayable", `Unsupported value: "Auto"`),
		Entry("a recovery without an endpoint", "DeliveryRecovery", `
  action: Retry
`, "spec.endpointRef", "Required value"),
		Entry("a time window that ends before it starts", "DeliveryRecovery", `
  endpointRef: {name: n8n-ingress}
  action: Auto
  selector:
    exhaustedAfter: "2026-11-28T12:00:00Z"
    exhaustedBefore: "2026-11-28T00:00:00Z"
`, "spec.selector", "selector.exhaustedAfter must be earlier than selector.exhaustedBefore"),
		Entry("a limit of zero", "DeliveryRecovery", `
  endpointRef: {name: n8n-ingress}
  action: Dismiss
  limit: 0
`, "spec.limit", "should be greater than or equal to 1"),
	)
})

func keyOf(u *unstructured.Unstructured) client.ObjectKey {
	return client.ObjectKeyFromObject(u)
}
