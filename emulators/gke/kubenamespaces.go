package gke

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// finalizeNamespaces does the namespace controller's work, which a bare
// API server leaves undone: a deleted Namespace stays Terminating until
// everything in it is deleted and its "kubernetes" finalizer removed.
// For each such Namespace it deletes the objects of every namespaced
// resource (at once: no kubelet would end a Pod's grace period), and when
// none is left, removes the finalizer through the finalize subresource,
// after which the API server deletes the Namespace.
func (k *kubeCluster) finalizeNamespaces(ctx context.Context, cs kubernetes.Interface, disc discovery.DiscoveryInterface, dyn dynamic.Interface) error {
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	var terminating []corev1.Namespace
	for _, ns := range list.Items {
		if ns.DeletionTimestamp != nil && slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
			terminating = append(terminating, ns)
		}
	}
	if len(terminating) == 0 {
		return nil
	}
	resources, err := deletableResources(disc)
	if err != nil {
		return err
	}
	var errList []error
	for _, ns := range terminating {
		if err := k.finalizeNamespace(ctx, cs, dyn, resources, ns); err != nil {
			errList = append(errList, fmt.Errorf("namespace %s: %w", ns.Name, err))
		}
	}
	return errors.Join(errList...)
}

func (k *kubeCluster) finalizeNamespace(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface, resources []schema.GroupVersionResource, ns corev1.Namespace) error {
	now := int64(0)
	background := metav1.DeletePropagationBackground
	var left []string
	for _, gvr := range resources {
		r := dyn.Resource(gvr).Namespace(ns.Name)
		err := r.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &now, PropagationPolicy: &background}, metav1.ListOptions{})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("delete %s: %w", gvr.Resource, err)
		}
		items, err := r.List(ctx, metav1.ListOptions{})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("list %s: %w", gvr.Resource, err)
		}
		if err == nil && len(items.Items) > 0 {
			left = append(left, fmt.Sprintf("%d %s", len(items.Items), gvr.Resource))
		}
	}
	if len(left) > 0 {
		// Objects with finalizers of their own wait for whoever set them.
		return fmt.Errorf("still holds %s", strings.Join(left, ", "))
	}
	ns.Spec.Finalizers = slices.DeleteFunc(slices.Clone(ns.Spec.Finalizers), func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, &ns, metav1.UpdateOptions{}); err != nil && !isNotFound(err) {
		return fmt.Errorf("finalize: %w", err)
	}
	k.log.Info("Finalized deleted namespace, as the namespace controller would", "namespace", ns.Name)
	return nil
}

// deletableResources lists the namespaced resources whose objects can be
// listed and deleted together, in their preferred versions.
func deletableResources(disc discovery.DiscoveryInterface) ([]schema.GroupVersionResource, error) {
	lists, err := disc.ServerPreferredNamespacedResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover resources: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if slices.Contains(r.Verbs, "deletecollection") && slices.Contains(r.Verbs, "list") && !strings.Contains(r.Name, "/") {
				out = append(out, gv.WithResource(r.Name))
			}
		}
	}
	return out, nil
}
