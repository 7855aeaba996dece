package kubeapply

import (
	"errors"
	"fmt"
)

// ForeignError reports an object that has one of a substrate's names but is
// not the pool's: it lacks the LabelPool label, or holds another pool's
// value in it, or another pool's ID in AnnotationPoolID.
// Nothing was written to it. Apply may return several, joined; errors.As
// finds the first.
type ForeignError struct {
	Kind      string // Namespace, ServiceAccount, Secret or DaemonSet
	Namespace string // empty for the Namespace itself
	Name      string
	Pool      string // the pool Apply or Remove was called for
	// Found is the pool the object names: its AnnotationPoolID when it
	// has one, else its LabelPool value; empty when it has no label.
	Found string
}

func (e *ForeignError) Error() string {
	if e.Found == "" {
		return fmt.Sprintf("%s %s exists without label %s, so it is not pool %q's and is left alone",
			e.Kind, objectName(e.Namespace, e.Name), LabelPool, e.Pool)
	}
	return fmt.Sprintf("%s %s belongs to pool %q (label %s), not pool %q, and is left alone",
		e.Kind, objectName(e.Namespace, e.Name), e.Found, LabelPool, e.Pool)
}

// ErrJoinSecretMissing reports that Apply was given no token and the Secret
// bcd-join is absent or holds no token: the caller mints a new token (and
// revokes the old one) and applies again with it.
var ErrJoinSecretMissing = errors.New("join secret missing or empty")

// ErrTerminating reports that one of the pool's own objects is being
// deleted (a teardown still under way), so it cannot be applied now. It is
// a reason to wait and retry, not a failure.
var ErrTerminating = errors.New("being deleted")

// ErrNodeNotFound reports that the cluster has no Node of the given name.
var ErrNodeNotFound = errors.New("node not found")

func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
