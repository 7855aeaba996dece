// Package telemetrytest records a telemetry.Telemetry in memory for tests:
// the metrics through an sdkmetric.ManualReader, read at one moment with
// Collect, and the ended spans through a tracetest.SpanRecorder.
package telemetrytest

import (
	"context"
	"maps"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/better-compute/kubernetes/shared/telemetry"
)

// Recorder is telemetry recorded in memory.
type Recorder struct {
	*telemetry.Telemetry
	Reader *sdkmetric.ManualReader
	Spans  *tracetest.SpanRecorder
}

// New returns a recorder, shut down when the test ends.
func New(t testing.TB) *Recorder {
	t.Helper()
	r := &Recorder{Reader: sdkmetric.NewManualReader(), Spans: tracetest.NewSpanRecorder()}
	tel, err := telemetry.New(telemetry.Options{
		Readers:        []sdkmetric.Reader{r.Reader},
		SpanProcessors: []sdktrace.SpanProcessor{r.Spans},
		Resource:       telemetry.Resource("test"),
	})
	if err != nil {
		t.Fatalf("telemetry.New: %v", err)
	}
	r.Telemetry = tel
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	return r
}

// Collect reads every metric recorded so far.
func (r *Recorder) Collect(t testing.TB) Snapshot {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return Snapshot{rm: rm}
}

// Attrs select the points of a metric: those whose attributes include
// every one of these keys with its value.
type Attrs map[string]string

// Point is one time series of a metric at the moment of Collect: its
// kind (telemetry.KindCounter, KindGauge or KindHistogram), its
// attributes and, for a counter or gauge, its value; for a histogram its
// count, sum, min and max.
type Point struct {
	Kind               string
	Attrs              Attrs
	Value              float64
	Count              uint64
	Sum, Min, Max      float64
	HasMinMax, IsHisto bool
}

// Snapshot is the metrics as Collect read them.
type Snapshot struct {
	rm metricdata.ResourceMetrics
}

// Names returns the names of the metrics that have points.
func (s Snapshot) Names() []string {
	var names []string
	for _, sm := range s.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return names
}

// Points returns the points of the named metric that match attrs.
func (s Snapshot) Points(name string, attrs Attrs) []Point {
	var out []Point
	for _, sm := range s.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out = appendIf(out, Point{Kind: sumKind(d.IsMonotonic), Attrs: attrsOf(p.Attributes), Value: float64(p.Value)}, attrs)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					out = appendIf(out, Point{Kind: sumKind(d.IsMonotonic), Attrs: attrsOf(p.Attributes), Value: p.Value}, attrs)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out = appendIf(out, Point{Kind: telemetry.KindGauge, Attrs: attrsOf(p.Attributes), Value: float64(p.Value)}, attrs)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out = appendIf(out, Point{Kind: telemetry.KindGauge, Attrs: attrsOf(p.Attributes), Value: p.Value}, attrs)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					pt := Point{Kind: telemetry.KindHistogram, Attrs: attrsOf(p.Attributes), Count: p.Count, Sum: p.Sum, IsHisto: true}
					mn, okMin := p.Min.Value()
					mx, okMax := p.Max.Value()
					pt.Min, pt.Max, pt.HasMinMax = mn, mx, okMin && okMax
					out = appendIf(out, pt, attrs)
				}
			}
		}
	}
	return out
}

// Sum is the total of the named counter over the points that match attrs.
func (s Snapshot) Sum(name string, attrs Attrs) float64 {
	var total float64
	for _, p := range s.Points(name, attrs) {
		total += p.Value
	}
	return total
}

// Histogram merges the points of the named histogram that match attrs:
// their count and sum, the least min and the greatest max.
func (s Snapshot) Histogram(name string, attrs Attrs) Point {
	var h Point
	for i, p := range s.Points(name, attrs) {
		h.IsHisto = true
		h.Count += p.Count
		h.Sum += p.Sum
		if i == 0 || p.Min < h.Min {
			h.Min = p.Min
		}
		if i == 0 || p.Max > h.Max {
			h.Max = p.Max
		}
		h.HasMinMax = p.HasMinMax
	}
	return h
}

// sumKind is the kind the Telemetry API writes a sum as: a counter when
// it only grows, else a gauge.
func sumKind(monotonic bool) string {
	if monotonic {
		return telemetry.KindCounter
	}
	return telemetry.KindGauge
}

func attrsOf(set attribute.Set) Attrs {
	a := Attrs{}
	for it := set.Iter(); it.Next(); {
		kv := it.Attribute()
		a[string(kv.Key)] = kv.Value.Emit()
	}
	return a
}

func appendIf(out []Point, p Point, want Attrs) []Point {
	for k, v := range want {
		if got, ok := p.Attrs[k]; !ok || got != v {
			return out
		}
	}
	p.Attrs = maps.Clone(p.Attrs)
	return append(out, p)
}
