package kubeapply

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/better-compute/kubernetes/shared/resource"
)

// Desired is what a substrate's objects should say.
type Desired struct {
	// PoolID is the pool's ID: every object carries it in
	// AnnotationPoolID, and PoolLabel of it in LabelPool.
	PoolID  string
	Image   string // the join daemon's image
	JoinURL string // where the daemon posts its join request
	// NodePools are the GKE node pools (LabelNodePool values) the daemon
	// runs on. At least one. Order and repeats do not matter.
	NodePools []string
	// Tolerations are the taints of the flavors' node pools, which the
	// daemon tolerates, their effects spelled as Kubernetes and the
	// product do (API.md §5). Order and repeats do not matter.
	Tolerations []resource.Taint
	// Token is the join token, set only on the run that just minted it:
	// the Secret is written then and only then. Empty: the Secret must
	// already hold a token (else ErrJoinSecretMissing).
	Token string
}

// effects are the taint effects a toleration may name.
var effects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}

// Environment of the join daemon.
const (
	EnvPoolID   = "BCD_POOL_ID"
	EnvJoinURL  = "BCD_JOIN_URL"
	EnvToken    = "BCD_TOKEN"
	EnvNodeName = "BCD_NODE_NAME" // the Node the pod runs on, which the join request names
)

// labelApp names the daemon's pods, beside LabelPool, in the DaemonSet's
// selector.
const labelApp = "app.kubernetes.io/name"

// objects are the apply configurations of one Desired. secret is nil when
// Desired has no token.
type objects struct {
	namespace      *corev1ac.NamespaceApplyConfiguration
	serviceAccount *corev1ac.ServiceAccountApplyConfiguration
	secret         *corev1ac.SecretApplyConfiguration
	daemonSet      *appsv1ac.DaemonSetApplyConfiguration
}

// build makes the apply configurations. It is deterministic in its input
// up to order and repeats of node pools and taints, so that applying the
// same substrate again is a no-op for the API server.
func build(d Desired) (objects, error) {
	if err := Validate(d); err != nil {
		return objects{}, err
	}
	value := PoolLabel(d.PoolID)
	labels := map[string]string{LabelPool: value}
	annotations := map[string]string{AnnotationPoolID: d.PoolID}
	podLabels := map[string]string{LabelPool: value, labelApp: DaemonSetName}

	pools := slices.Clone(d.NodePools)
	slices.Sort(pools)
	pools = slices.Compact(pools)

	taints := slices.Clone(d.Tolerations)
	slices.SortFunc(taints, func(a, b resource.Taint) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Value, b.Value), cmp.Compare(a.Effect, b.Effect))
	})
	taints = slices.Compact(taints)
	tolerations := make([]*corev1ac.TolerationApplyConfiguration, len(taints))
	for i, t := range taints {
		// Equal, not Exists: the daemon tolerates exactly the flavors'
		// taints, and lands on no node the tenant reserved otherwise.
		tolerations[i] = corev1ac.Toleration().
			WithKey(t.Key).
			WithOperator(corev1.TolerationOpEqual).
			WithValue(t.Value).
			WithEffect(corev1.TaintEffect(t.Effect))
	}

	o := objects{
		namespace: corev1ac.Namespace(Namespace).WithLabels(labels).WithAnnotations(annotations),
		serviceAccount: corev1ac.ServiceAccount(ServiceAccountName, Namespace).
			WithLabels(labels).WithAnnotations(annotations),
		daemonSet: appsv1ac.DaemonSet(DaemonSetName, Namespace).
			WithLabels(labels).WithAnnotations(annotations).
			WithSpec(appsv1ac.DaemonSetSpec().
				WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels)).
				WithTemplate(corev1ac.PodTemplateSpec().
					WithLabels(podLabels).
					WithSpec(corev1ac.PodSpec().
						WithServiceAccountName(ServiceAccountName).
						WithAffinity(corev1ac.Affinity().
							WithNodeAffinity(corev1ac.NodeAffinity().
								WithRequiredDuringSchedulingIgnoredDuringExecution(corev1ac.NodeSelector().
									WithNodeSelectorTerms(corev1ac.NodeSelectorTerm().
										WithMatchExpressions(corev1ac.NodeSelectorRequirement().
											WithKey(LabelNodePool).
											WithOperator(corev1.NodeSelectorOpIn).
											WithValues(pools...)))))).
						WithTolerations(tolerations...).
						WithContainers(corev1ac.Container().
							WithName(ContainerName).
							WithImage(d.Image).
							WithEnv(
								corev1ac.EnvVar().WithName(EnvPoolID).WithValue(d.PoolID),
								corev1ac.EnvVar().WithName(EnvJoinURL).WithValue(d.JoinURL),
								corev1ac.EnvVar().WithName(EnvToken).WithValueFrom(corev1ac.EnvVarSource().
									WithSecretKeyRef(corev1ac.SecretKeySelector().
										WithName(SecretName).
										WithKey(SecretKey))),
								corev1ac.EnvVar().WithName(EnvNodeName).WithValueFrom(corev1ac.EnvVarSource().
									WithFieldRef(corev1ac.ObjectFieldSelector().
										WithFieldPath("spec.nodeName"))),
							))))),
	}
	// The digest of what is applied, minus the token, marks the
	// DaemonSet, so that Check can tell from one read that nothing
	// differs.
	digest, err := digestOf(o)
	if err != nil {
		return objects{}, err
	}
	o.daemonSet.WithAnnotations(map[string]string{AnnotationDigest: digest})
	if d.Token != "" {
		// data, not stringData: stringData is write-only, so the server
		// would never show the applied field and every apply would look
		// like a change to it.
		o.secret = corev1ac.Secret(SecretName, Namespace).
			WithLabels(labels).WithAnnotations(annotations).
			WithType(corev1.SecretTypeOpaque).
			WithData(map[string][]byte{SecretKey: []byte(d.Token)})
	}
	return o, nil
}

// Validate checks what the API server would refuse only after some
// objects were written, so that Apply writes all or nothing for a bad
// Desired. Its failure is d's, not the cluster's: applying d again fails
// the same way.
func Validate(d Desired) error {
	var errs []error
	if msgs := validation.IsValidLabelValue(PoolLabel(d.PoolID)); d.PoolID == "" || len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("pool ID %q gives no label value: %s", d.PoolID, strings.Join(msgs, "; ")))
	}
	if d.Image == "" {
		errs = append(errs, errors.New("no image"))
	}
	if d.JoinURL == "" {
		errs = append(errs, errors.New("no join URL"))
	}
	if len(d.NodePools) == 0 {
		errs = append(errs, errors.New("no node pools"))
	}
	for _, np := range d.NodePools {
		if msgs := validation.IsValidLabelValue(np); np == "" || len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node pool %q is not a label value: %s", np, strings.Join(msgs, "; ")))
		}
	}
	for _, t := range d.Tolerations {
		if !slices.Contains(effects, corev1.TaintEffect(t.Effect)) {
			errs = append(errs, fmt.Errorf("taint %s=%s: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Value, t.Effect))
		}
		if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("taint key %q: %s", t.Key, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("taint %s value %q: %s", t.Key, t.Value, strings.Join(msgs, "; ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("desired substrate objects: %w", err)
	}
	return nil
}

// AnnotationDigest, on the DaemonSet, is the digest of the objects last
// applied (their configurations without the token).
const AnnotationDigest = "better-compute.dev/applied-digest"

// digestOf is the hex SHA-256 (first 16 bytes) of the configurations of
// the Namespace, ServiceAccount and DaemonSet.
func digestOf(o objects) (string, error) {
	b, err := json.Marshal([]any{o.namespace, o.serviceAccount, o.daemonSet})
	if err != nil {
		return "", fmt.Errorf("digest of the substrate's objects: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}
