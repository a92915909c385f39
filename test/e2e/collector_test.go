package e2e

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	otelreceiver "go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// collector is the OpenTelemetry Collector's own OTLP receiver, run in the
// suite's process on loopback (OTLP over HTTP): the manager exports its
// spans to it as it would to a cluster's collector, and the specs read
// what arrived from its sink.
type collector struct {
	endpoint string // http://host:port, for OTEL_EXPORTER_OTLP_ENDPOINT
	sink     *consumertest.TracesSink
	rcv      otelreceiver.Traces
}

func startCollector(addr string) (*collector, error) {
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	// HTTP only: gRPC stays off, as its default leaves it.
	http := cfg.Protocols.HTTP.GetOrInsertDefault()
	http.ServerConfig.NetAddr.Endpoint = addr
	c := &collector{endpoint: "http://" + addr, sink: new(consumertest.TracesSink)}
	rcv, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(component.MustNewType("otlp")), cfg, c.sink)
	if err != nil {
		return nil, err
	}
	if err := rcv.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	c.rcv = rcv
	return c, nil
}

func (c *collector) stop() error { return c.rcv.Shutdown(context.Background()) }

// span is one span the collector received, as the specs look at it.
type span struct {
	name, traceID, spanID, parentSpanID string
	links                               []string // span IDs
	attrs                               map[string]any
	status                              ptrace.StatusCode
}

// spans returns every span received so far.
func (c *collector) spans() []span {
	var out []span
	for _, td := range c.sink.AllTraces() {
		rss := td.ResourceSpans()
		for i := range rss.Len() {
			sss := rss.At(i).ScopeSpans()
			for j := range sss.Len() {
				ss := sss.At(j).Spans()
				for k := range ss.Len() {
					s := ss.At(k)
					sp := span{name: s.Name(), traceID: s.TraceID().String(), spanID: s.SpanID().String(),
						parentSpanID: s.ParentSpanID().String(), attrs: s.Attributes().AsRaw(), status: s.Status().Code()}
					for l := range s.Links().Len() {
						sp.links = append(sp.links, s.Links().At(l).SpanID().String())
					}
					out = append(out, sp)
				}
			}
		}
	}
	return out
}
