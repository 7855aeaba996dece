package clusters

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"

	"github.com/better-compute/kubernetes/shared/logging"
	"github.com/better-compute/kubernetes/shared/model"
)

// resolveIntents finds the operation of a call recorded as intended but
// whose operation was never recorded (the run died in between, or the
// call failed transiently, which may have been after the provider did
// it): if the provider has such an operation, it is adopted; if not, the
// call never happened and the intent is dropped. It runs before anything
// else is called, and reports whether there was any.
func (r *Reconciler) resolveIntents(ctx context.Context, g GKE, n names, in *Input) (bool, error) {
	type pending struct {
		provider *model.Intent
		target   string
		set      func(op string)
	}
	var todo []pending
	if c := &in.Cluster.Status.Provider; c.Intent != nil && c.Operation == "" {
		todo = append(todo, pending{c.Intent, n.cluster, func(op string) {
			if op == "" {
				c.Intent = nil
				return
			}
			c.Operation, c.OperationKind = op, c.Intent.Kind
		}})
	}
	for i := range in.Pools {
		p := &in.Pools[i].Status.Provider
		if p.Intent != nil && p.Operation == "" {
			todo = append(todo, pending{p.Intent, n.pool(in.Pools[i].Spec.Name), func(op string) {
				if op == "" {
					p.Intent = nil
					return
				}
				p.Operation, p.OperationKind = op, p.Intent.Kind
			}})
		}
	}
	if len(todo) == 0 {
		return false, nil
	}
	if err := r.budget.take(ctx, in.Cluster.Spec.Project); err != nil {
		return true, err
	}
	resp, err := g.ListOperations(ctx, &containerpb.ListOperationsRequest{Parent: n.parent})
	if err != nil {
		return true, fmt.Errorf("list operations: %w", err)
	}
	for _, t := range todo {
		found := ""
		for _, op := range resp.GetOperations() {
			start, _ := time.Parse(time.RFC3339Nano, op.GetStartTime())
			if slices.Contains(opTypes[t.provider.Kind], op.GetOperationType()) && sameTarget(op.GetTargetLink(), t.target) && !start.Before(t.provider.At.Add(-time.Second)) {
				found = n.operation(op.GetName())
			}
		}
		logging.FromContext(ctx).Info("Resolved a call recorded before a run died", "target", t.target, "call", t.provider.Kind, "operation", found)
		t.set(found)
	}
	return true, nil
}
