package kubeapply

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Remove deletes the pool's objects: the DaemonSet, the Secret, the
// ServiceAccount and the Namespace, in that order, each only when it is
// the pool's (LabelPool=PoolLabel(poolID), and AnnotationPoolID, when set,
// poolID). It waits for nothing: gone reports that none of
// the pool's objects is left undeleted, counting an absent object, one
// whose deletion has begun (deletionTimestamp set, such as a Namespace
// still Terminating) and one it has just deleted. Objects that are not the
// pool's are left alone and do not count. The pool's Namespace goes with
// whatever else it holds: its label makes its content the pool's.
//
// The one exception: when a foreign object of a substrate name lives in the
// pool's Namespace, deleting the Namespace would delete it too, so the
// Namespace is kept, gone is false and the error wraps a *ForeignError for
// each such object.
func (c *Cluster) Remove(ctx context.Context, poolID string) (gone bool, err error) {
	if poolID == "" {
		return false, errors.New("remove substrate objects: empty pool ID")
	}
	refs := c.refs()
	var foreign []error
	for _, i := range []int{daemonSetRef, secretRef, serviceAccountRef, namespaceRef} {
		r := refs[i]
		o, err := r.get(ctx)
		if err != nil {
			return false, fmt.Errorf("remove substrate objects of pool %q: read %s: %w", poolID, r, err)
		}
		if o == nil || o.GetDeletionTimestamp() != nil {
			continue
		}
		if fe := foreignTo(poolID, r, o); fe != nil {
			if i != namespaceRef {
				foreign = append(foreign, fe)
			}
			continue
		}
		if i == namespaceRef && len(foreign) > 0 {
			return false, fmt.Errorf("remove substrate objects of pool %q: keep %s, which holds objects that are not the pool's: %w", poolID, r, errors.Join(foreign...))
		}
		if err := r.delete(ctx, o.GetUID()); err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("remove substrate objects of pool %q: delete %s: %w", poolID, r, err)
		}
	}
	return true, nil
}
