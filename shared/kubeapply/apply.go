package kubeapply

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Applied says what an Apply did.
type Applied struct {
	// Changed names the objects the Apply created or modified, such as
	// "DaemonSet better-compute-system/bcd", in the order applied. Empty
	// when the cluster already held the desired objects.
	Changed []string
}

// Apply makes the cluster hold d's objects: the Namespace, the
// ServiceAccount, the Secret (written only when d.Token is set) and the
// DaemonSet, applied in that order under FieldManager.
//
// It reads every object first and writes nothing when any of them:
//   - is foreign (no LabelPool, or another pool's): a *ForeignError for
//     each, joined;
//   - is the pool's but being deleted: an error wrapping ErrTerminating;
//   - is the Secret, d.Token is empty and the Secret is absent or holds no
//     token: an error wrapping ErrJoinSecretMissing.
//
// The pool's objects are applied with Force, so that a field another
// manager changed on them is taken back, and each with the resourceVersion
// it was read at, so that an object changed since the check (relabelled,
// say) is refused with a conflict rather than overwritten; the next run
// checks again. Applying the same d again changes nothing on the server.
// An error after the first write leaves the objects applied so far (listed
// in the Applied returned with it), which a later Apply completes.
func (c *Cluster) Apply(ctx context.Context, d Desired) (Applied, error) {
	objs, err := build(d)
	if err != nil {
		return Applied{}, err
	}
	refs := c.refs()
	seen := make([]metav1.Object, len(refs))
	var foreign []error
	for i, r := range refs {
		o, err := r.get(ctx)
		if err != nil {
			return Applied{}, fmt.Errorf("read %s: %w", r, err)
		}
		seen[i] = o
		if fe := foreignTo(d.PoolID, r, o); fe != nil {
			foreign = append(foreign, fe)
		}
	}
	if len(foreign) > 0 {
		return Applied{}, fmt.Errorf("apply substrate objects of pool %q: %w", d.PoolID, errors.Join(foreign...))
	}
	for i, r := range refs {
		if o := seen[i]; o != nil && o.GetDeletionTimestamp() != nil {
			return Applied{}, fmt.Errorf("apply substrate objects of pool %q: %s: %w", d.PoolID, r, ErrTerminating)
		}
	}
	if objs.secret == nil {
		if err := checkSecret(seen[secretRef]); err != nil {
			return Applied{}, fmt.Errorf("apply substrate objects of pool %q: %s: %w", d.PoolID, refs[secretRef], err)
		}
	}

	var applied Applied
	for i, r := range refs {
		if i == secretRef && objs.secret == nil {
			continue
		}
		// A created object has no resourceVersion to hold it to: one that
		// appears between the read and this write is overwritten. The
		// window is one round trip, and nothing else should be making
		// objects of these names.
		var rv string
		if seen[i] != nil {
			rv = seen[i].GetResourceVersion()
		}
		o, err := r.apply(ctx, objs, rv)
		if err != nil {
			return applied, fmt.Errorf("apply %s: %w", r, err)
		}
		if o.GetResourceVersion() != rv {
			applied.Changed = append(applied.Changed, r.String())
		}
	}
	return applied, nil
}

// Check reports, by reading only, whether the cluster holds d's objects as
// Apply would leave them (d.Token aside): all four are there, are the
// pool's, are not being deleted, the Secret holds a token, and the
// DaemonSet carries the digest of d. False means Apply has work to do, or
// an error to report.
func (c *Cluster) Check(ctx context.Context, d Desired) (bool, error) {
	d.Token = ""
	objs, err := build(d)
	if err != nil {
		return false, err
	}
	for i, r := range c.refs() {
		o, err := r.get(ctx)
		if err != nil {
			return false, fmt.Errorf("read %s: %w", r, err)
		}
		if o == nil || foreignTo(d.PoolID, r, o) != nil || o.GetDeletionTimestamp() != nil {
			return false, nil
		}
		switch i {
		case secretRef:
			if checkSecret(o) != nil {
				return false, nil
			}
		case daemonSetRef:
			want := objs.daemonSet.Annotations[AnnotationDigest]
			if o.GetAnnotations()[AnnotationDigest] != want {
				return false, nil
			}
		}
	}
	return true, nil
}

// foreignTo returns a *ForeignError when o exists and is not pool's: its
// LabelPool is not PoolLabel(pool), or its AnnotationPoolID names another
// pool (two IDs may derive one label value). An object without the
// annotation is told by its label alone, as objects applied before the
// annotation existed are.
func foreignTo(pool string, r ref, o metav1.Object) *ForeignError {
	if o == nil {
		return nil
	}
	found, ok := o.GetLabels()[LabelPool]
	id, named := o.GetAnnotations()[AnnotationPoolID]
	if ok && found == PoolLabel(pool) && (!named || id == pool) {
		return nil
	}
	if ok && named {
		found = id
	}
	return &ForeignError{Kind: r.kind, Namespace: r.namespace, Name: r.name, Pool: pool, Found: found}
}

// checkSecret says whether the pool's Secret, read as o, holds a token.
func checkSecret(o metav1.Object) error {
	if o == nil {
		return ErrJoinSecretMissing
	}
	s, ok := o.(*corev1.Secret)
	if !ok {
		return fmt.Errorf("read a %T, want a Secret", o)
	}
	if len(s.Data[SecretKey]) == 0 {
		return ErrJoinSecretMissing
	}
	return nil
}

// ref is one of the substrate's objects, with the calls that read, apply
// and delete it.
type ref struct {
	kind, namespace, name string
	// get returns nil, nil when the object is absent.
	get func(context.Context) (metav1.Object, error)
	// apply writes the object's configuration from objects, held to the
	// resourceVersion rv when not empty.
	apply func(ctx context.Context, o objects, rv string) (metav1.Object, error)
	// delete deletes the object if its UID is still uid.
	delete func(ctx context.Context, uid types.UID) error
}

func (r ref) String() string { return r.kind + " " + objectName(r.namespace, r.name) }

// The index of each object in refs: the order in which Apply writes them.
const (
	namespaceRef = iota
	serviceAccountRef
	secretRef
	daemonSetRef
)

func (c *Cluster) refs() []ref {
	core := c.client.CoreV1()
	apps := c.client.AppsV1()
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	refs := []ref{
		namespaceRef: {
			kind: "Namespace", name: Namespace,
			get: getter(core.Namespaces().Get, Namespace),
			apply: func(ctx context.Context, o objects, rv string) (metav1.Object, error) {
				if rv != "" {
					o.namespace.WithResourceVersion(rv)
				}
				return core.Namespaces().Apply(ctx, o.namespace, opts)
			},
			delete: deleter(core.Namespaces().Delete, Namespace),
		},
		serviceAccountRef: {
			kind: "ServiceAccount", namespace: Namespace, name: ServiceAccountName,
			get: getter(core.ServiceAccounts(Namespace).Get, ServiceAccountName),
			apply: func(ctx context.Context, o objects, rv string) (metav1.Object, error) {
				if rv != "" {
					o.serviceAccount.WithResourceVersion(rv)
				}
				return core.ServiceAccounts(Namespace).Apply(ctx, o.serviceAccount, opts)
			},
			delete: deleter(core.ServiceAccounts(Namespace).Delete, ServiceAccountName),
		},
		secretRef: {
			kind: "Secret", namespace: Namespace, name: SecretName,
			get: getter(core.Secrets(Namespace).Get, SecretName),
			apply: func(ctx context.Context, o objects, rv string) (metav1.Object, error) {
				if rv != "" {
					o.secret.WithResourceVersion(rv)
				}
				return core.Secrets(Namespace).Apply(ctx, o.secret, opts)
			},
			delete: deleter(core.Secrets(Namespace).Delete, SecretName),
		},
		daemonSetRef: {
			kind: "DaemonSet", namespace: Namespace, name: DaemonSetName,
			get: getter(apps.DaemonSets(Namespace).Get, DaemonSetName),
			apply: func(ctx context.Context, o objects, rv string) (metav1.Object, error) {
				if rv != "" {
					o.daemonSet.WithResourceVersion(rv)
				}
				return apps.DaemonSets(Namespace).Apply(ctx, o.daemonSet, opts)
			},
			delete: deleter(apps.DaemonSets(Namespace).Delete, DaemonSetName),
		},
	}
	return refs
}

// getter adapts a typed client's Get: an absent object is nil, not an
// error.
func getter[T metav1.Object](get func(context.Context, string, metav1.GetOptions) (T, error), name string) func(context.Context) (metav1.Object, error) {
	return func(ctx context.Context) (metav1.Object, error) {
		o, err := get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return o, nil
	}
}

// deleter adapts a typed client's Delete. The UID precondition makes sure
// the object deleted is the one found labelled, not one made in its place
// since. Dependents (the DaemonSet's pods) go in the background: the
// garbage collector removes them.
func deleter(del func(context.Context, string, metav1.DeleteOptions) error, name string) func(context.Context, types.UID) error {
	return func(ctx context.Context, uid types.UID) error {
		policy := metav1.DeletePropagationBackground
		return del(ctx, name, metav1.DeleteOptions{
			Preconditions:     &metav1.Preconditions{UID: &uid},
			PropagationPolicy: &policy,
		})
	}
}
