package gke

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
)

// joinTimeout bounds one join call.
const joinTimeout = 10 * time.Second

// joinState is bcd's state on one Node.
type joinState struct {
	// token is the hash of the token the node joined with ("" until it
	// has).
	token   string
	next    time.Time // the earliest retry of a failed call
	backoff time.Duration
}

// What bcd is, as its image documents it (API.md §9): the DaemonSet that
// runs it and the environment it reads. The simulator spells them itself,
// rather than reading the product's constants, so that a product that
// drifts from bcd's contract fails against it.
const (
	bcdNamespace     = "better-compute-system"
	bcdDaemonSetName = "bcd"
	bcdEnvJoinURL    = "BCD_JOIN_URL"
	bcdEnvPoolID     = "BCD_POOL_ID"
	bcdEnvToken      = "BCD_TOKEN"
	bcdEnvNodeName   = "BCD_NODE_NAME" // the Node it runs on, which its join call names
)

// bcdConfig is what bcd reads from its environment. bcd needs all of it
// to start: a DaemonSet that lacks any of it joins no node.
type bcdConfig struct {
	url, poolID, token string
	// nodeName is BCD_NODE_NAME's value, unless nodeNameOfPod: then it
	// is the downward API's spec.nodeName, the name of each Pod's Node.
	nodeName      string
	nodeNameOfPod bool
}

// nodeNameOn is the node name bcd reads on node n.
func (c bcdConfig) nodeNameOn(n *corev1.Node) string {
	if c.nodeNameOfPod {
		return n.Name
	}
	return c.nodeName
}

// syncBCD plays bcd on every Node the bcd DaemonSet selects: it calls the
// join URL once per node and token, as bcd does when it starts on a node,
// retrying failed calls with backoff. A node that the DaemonSet stops
// selecting (or a DaemonSet that goes) is forgotten, so that it joins
// again when selected again, as a new bcd Pod would.
func (k *kubeCluster) syncBCD(ctx context.Context, cs kubernetes.Interface, st *syncState) error {
	ds, err := cs.AppsV1().DaemonSets(bcdNamespace).Get(ctx, bcdDaemonSetName, metav1.GetOptions{})
	if isNotFound(err) || (err == nil && ds.DeletionTimestamp != nil) {
		clear(st.joins)
		return nil
	}
	if err != nil {
		return fmt.Errorf("get daemonset %s/%s: %w", bcdNamespace, bcdDaemonSetName, err)
	}
	cfg, err := readBCDConfig(ctx, ds, func(ctx context.Context, name string) (*corev1.Secret, error) {
		return cs.CoreV1().Secrets(ds.Namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return err
	}
	if err := checkJoinURL(cfg.url, k.env.cfg.JoinURLs); err != nil {
		return fmt.Errorf("daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	sum := sha256.Sum256([]byte(cfg.token))
	tokenHash := hex.EncodeToString(sum[:8])
	selected := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.DeletionTimestamp != nil || !daemonSetSelects(&ds.Spec.Template.Spec, n) {
			continue
		}
		selected[n.Name] = true
		j := st.joins[n.Name]
		if j == nil {
			j = &joinState{}
			st.joins[n.Name] = j
		}
		if j.token == tokenHash || time.Now().Before(j.next) {
			continue
		}
		if err := k.join(ctx, cfg, n); err != nil {
			if ctx.Err() != nil {
				return err
			}
			j.backoff = min(max(2*j.backoff, time.Second), 30*time.Second)
			j.next = time.Now().Add(j.backoff)
			k.log.Warn("bcd's join call failed; retrying", "node", n.Name, "url", cfg.url, "retryIn", j.backoff, "error", err)
			continue
		}
		again := j.token != ""
		j.token, j.backoff, j.next = tokenHash, 0, time.Time{}
		k.log.Info("Node joined, as bcd would", "node", n.Name, "poolId", cfg.poolID, "url", cfg.url, "newToken", again)
	}
	for name := range st.joins {
		if !selected[name] {
			delete(st.joins, name)
		}
	}
	return nil
}

// readBCDConfig reads the environment of the DaemonSet's first container
// as the kubelet gives it to bcd: values, keys of Secrets of the
// DaemonSet's namespace (which secret gets) and the downward API's
// spec.nodeName. It fails when bcd would not start: a Secret or key
// missing, or any of bcd's variables unset or empty.
func readBCDConfig(ctx context.Context, ds *appsv1.DaemonSet, secret func(ctx context.Context, name string) (*corev1.Secret, error)) (bcdConfig, error) {
	containers := ds.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		return bcdConfig{}, fmt.Errorf("daemonset %s/%s has no container", ds.Namespace, ds.Name)
	}
	var cfg bcdConfig
	for _, e := range containers[0].Env {
		var v string
		switch {
		case e.ValueFrom == nil:
			v = e.Value
		case e.ValueFrom.FieldRef != nil:
			// Of the downward API, bcd's environment takes only the
			// Pod's Node; other fields are not modelled and count as
			// unset.
			if e.Name == bcdEnvNodeName {
				cfg.nodeName, cfg.nodeNameOfPod = "", e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}
			continue
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			sec, err := secret(ctx, ref.Name)
			if err != nil {
				return bcdConfig{}, fmt.Errorf("env %s of daemonset %s/%s: secret %s: %w", e.Name, ds.Namespace, ds.Name, ref.Name, err)
			}
			b, ok := sec.Data[ref.Key]
			if !ok {
				return bcdConfig{}, fmt.Errorf("env %s of daemonset %s/%s: secret %s has no key %q", e.Name, ds.Namespace, ds.Name, ref.Name, ref.Key)
			}
			v = string(b)
		default:
			continue // bcd reads none of the other sources
		}
		switch e.Name {
		case bcdEnvJoinURL:
			cfg.url = v
		case bcdEnvPoolID:
			cfg.poolID = v
		case bcdEnvToken:
			cfg.token = v
		case bcdEnvNodeName:
			cfg.nodeName, cfg.nodeNameOfPod = v, false
		}
	}
	var missing []string
	for _, env := range []struct {
		name string
		set  bool
	}{
		{bcdEnvJoinURL, cfg.url != ""}, {bcdEnvPoolID, cfg.poolID != ""}, {bcdEnvToken, cfg.token != ""},
		{bcdEnvNodeName, cfg.nodeName != "" || cfg.nodeNameOfPod},
	} {
		if !env.set {
			missing = append(missing, env.name)
		}
	}
	if len(missing) > 0 {
		return bcdConfig{}, fmt.Errorf("daemonset %s/%s: its first container's environment has no %s", ds.Namespace, ds.Name, strings.Join(missing, " or "))
	}
	return cfg, nil
}

// checkJoinURL refuses a join URL that is not one of allowed (none: any
// is), so that the simulator never posts a join token elsewhere.
func checkJoinURL(url string, allowed []string) error {
	if len(allowed) == 0 || slices.Contains(allowed, url) {
		return nil
	}
	return fmt.Errorf("its %s %q is not the join method's URL; bcd posts no token there", bcdEnvJoinURL, url)
}

// join makes bcd's call for node n.
func (k *kubeCluster) join(ctx context.Context, cfg bcdConfig, n *corev1.Node) error {
	body, err := json.Marshal(map[string]string{"nodeName": cfg.nodeNameOn(n), "providerId": n.Spec.ProviderID})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("join request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cfg.token)
	resp, err := k.env.http.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", cfg.url, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s: %s", cfg.url, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// daemonSetSelects reports whether a DaemonSet with Pod spec p would run
// a Pod on node n: its nodeSelector, its required node affinity, and its
// tolerations of the node's NoSchedule and NoExecute taints, as the
// DaemonSet controller decides.
func daemonSetSelects(p *corev1.PodSpec, n *corev1.Node) bool {
	for k, v := range p.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	if a := p.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		match := false
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if termMatches(term, n) {
				match = true
				break
			}
		}
		if !match {
			return false
		}
	}
	tolerations := append(slices.Clone(p.Tolerations), daemonTolerations...)
	for i := range n.Spec.Taints {
		t := &n.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(logr.Discard(), t, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// daemonTolerations are those the DaemonSet controller adds to every
// daemon Pod (but network-unavailable, which only host-network Pods get).
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// termMatches reports whether a node selector term (its expressions and
// fields ANDed) selects n; an empty term selects nothing, as in
// Kubernetes.
func termMatches(term corev1.NodeSelectorTerm, n *corev1.Node) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	ops := map[corev1.NodeSelectorOperator]selection.Operator{
		corev1.NodeSelectorOpIn: selection.In, corev1.NodeSelectorOpNotIn: selection.NotIn,
		corev1.NodeSelectorOpExists: selection.Exists, corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
		corev1.NodeSelectorOpGt: selection.GreaterThan, corev1.NodeSelectorOpLt: selection.LessThan,
	}
	matches := func(reqs []corev1.NodeSelectorRequirement, set labels.Set) bool {
		for _, r := range reqs {
			op, ok := ops[r.Operator]
			if !ok {
				return false
			}
			req, err := labels.NewRequirement(r.Key, op, r.Values)
			if err != nil || !req.Matches(set) {
				return false
			}
		}
		return true
	}
	return matches(term.MatchExpressions, labels.Set(n.Labels)) &&
		matches(term.MatchFields, labels.Set{"metadata.name": n.Name})
}
