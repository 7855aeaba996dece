package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// ProviderCalls returns a gRPC client interceptor for the provider's
// client (GKE's ClusterManager): each call is counted (provider.calls, by
// method and gRPC code) and traced as a client span under the caller's
// (a reconcile run's), so that a run's trace shows its provider calls and
// how long each took. Every attempt on the wire counts, the client
// library's own retries included: that is what the provider's quota sees.
func (t *Telemetry) ProviderCalls() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, fullMethod string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		method := fullMethod[strings.LastIndex(fullMethod, "/")+1:]
		ctx, span := t.tracer.Start(ctx, "gke."+method, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", fullMethod)))
		defer span.End()
		err := invoker(ctx, fullMethod, req, reply, cc, opts...)
		code := status.Code(err)
		span.SetAttributes(attribute.String("rpc.grpc.status_code", code.String()))
		if err != nil {
			span.SetStatus(codes.Error, code.String())
		}
		t.metrics.ProviderCall(ctx, method, code.String())
		return err
	}
}
