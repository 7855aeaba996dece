package gke

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/container/apiv1/containerpb"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// snapshotVersion is the version of Snapshot's format.
const snapshotVersion = 1

// savedState is Snapshot's format. Protocol Buffers messages are in
// protojson.
type savedState struct {
	Version    int            `json:"version"`
	Seq        int            `json:"seq"`
	Endpoints  int            `json:"endpoints"`
	Clusters   []savedCluster `json:"clusters"`
	Operations []savedOp      `json:"operations"` // oldest first
}

type savedCluster struct {
	Key     string          `json:"key"`     // projects/P/locations/L/clusters/C
	Cluster json.RawMessage `json:"cluster"` // without its node pools
	Region  string          `json:"region"`
	ErrMsg  string          `json:"errorMessage,omitempty"`
	Pools   []savedPool     `json:"nodePools"` // in creation order
	// Kubernetes is the cluster's Kubernetes API (WithKubernetes): what
	// keeps its endpoint, CA and admin token across a restart. Its objects
	// are in Kubernetes.Dir.
	Kubernetes *savedKube `json:"kubernetes,omitempty"`
}

type savedKube struct {
	Port       int    `json:"port"`
	CACert     string `json:"caCertificate"`
	CAKey      string `json:"caKey"`
	AdminToken string `json:"adminToken"`
	Up         bool   `json:"up,omitempty"`
}

type savedPool struct {
	Pool  json.RawMessage  `json:"nodePool"`
	UID   string           `json:"uid"`
	Nodes map[string]int32 `json:"nodes"` // zone → current node count
	Short *savedShort      `json:"short,omitempty"`
}

// savedShort is a shortfall: the nodes a stockout withholds.
type savedShort struct {
	Want    map[string]int32 `json:"want"`
	RetryAt time.Time        `json:"retryAt"`
	Form    StockoutForm     `json:"form,omitempty"`
}

func (sh *shortfall) saved() *savedShort {
	if sh == nil {
		return nil
	}
	return &savedShort{Want: maps.Clone(sh.want), RetryAt: sh.retryAt, Form: sh.form}
}

func (ss *savedShort) restore() *shortfall {
	if ss == nil {
		return nil
	}
	return &shortfall{want: maps.Clone(ss.Want), retryAt: ss.RetryAt, form: ss.Form}
}

type savedOp struct {
	Operation json.RawMessage `json:"operation"`
	// Cluster and ClusterID name the cluster the operation is on (a later
	// cluster of the same name has another ID).
	Cluster   string    `json:"cluster"`
	ClusterID string    `json:"clusterId"`
	Pool      string    `json:"nodePool,omitempty"`
	UID       string    `json:"nodePoolUid,omitempty"`
	Seq       int       `json:"seq"`
	End       time.Time `json:"end"`
	Lost      bool      `json:"lost,omitempty"`
	// Running operations only: how they will end.
	Fail   json.RawMessage `json:"fail,omitempty"` // google.rpc.Status
	Effect *savedEffect    `json:"effect,omitempty"`
}

type savedEffect struct {
	RPC         string            `json:"rpc"`
	Own         bool              `json:"own,omitempty"`
	Fates       []savedFate       `json:"fates,omitempty"`
	Before      []savedStatus     `json:"before,omitempty"`
	Version     string            `json:"version,omitempty"`
	Autoscaling json.RawMessage   `json:"autoscaling,omitempty"`
	Update      json.RawMessage   `json:"update,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Cluster     json.RawMessage   `json:"clusterUpdate,omitempty"`
	Maintenance json.RawMessage   `json:"maintenancePolicy,omitempty"`
	Patch       json.RawMessage   `json:"clusterPatch,omitempty"`
}

type savedFate struct {
	Pool    string           `json:"nodePool"`
	UID     string           `json:"uid"`
	Fail    json.RawMessage  `json:"fail,omitempty"`
	Status  string           `json:"status"`
	Message string           `json:"message,omitempty"`
	Nodes   map[string]int32 `json:"nodes"`
	Short   *savedShort      `json:"short,omitempty"`
}

type savedStatus struct {
	Pool    string `json:"nodePool"`
	UID     string `json:"uid"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Snapshot returns the simulator's clusters, node pools and operations,
// running ones with what they will do when they end, as JSON for Restore.
// If during is not nil, Snapshot calls it once it has read the state and
// before it lets any call in: a caller that reads another emulator's state
// in during gets the two as of one instant, with no call to the simulator
// in between. Injected faults and call counts are not part of it.
func (s *Server) Snapshot(during func()) ([]byte, error) {
	g := s.GServer
	var st savedState
	var err error
	func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		st, err = g.save()
		if during != nil {
			during()
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("gke: snapshot: %w", err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("gke: snapshot: %w", err)
	}
	return b, nil
}

// Restore replaces the simulator's clusters, node pools and operations
// with those of a Snapshot. Operations that were running go on running
// until their end time, as if the simulator had never stopped: those whose
// end has passed complete at the next call, in the order they end. Nothing
// changes if data is invalid.
func (s *Server) Restore(data []byte) error {
	var st savedState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("gke: restore: %w", err)
	}
	if st.Version != snapshotVersion {
		return fmt.Errorf("gke: restore: format version %d, want %d", st.Version, snapshotVersion)
	}
	r, err := load(st)
	if err != nil {
		return fmt.Errorf("gke: restore: %w", err)
	}
	g := s.GServer
	kubes, err := g.restoreKubernetes(r)
	if err != nil {
		return fmt.Errorf("gke: restore: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.clusters
	g.clusters, g.ops, g.opList, g.running = r.clusters, r.ops, r.opList, r.running
	for key, kc := range kubes {
		kc.attach(g.clusters[key])
	}
	for _, c := range old {
		if c.kube != nil {
			c.kube.closeAsync(false)
		}
	}
	g.seq, g.endpoints = st.Seq, st.Endpoints
	for _, c := range g.clusters {
		g.refresh(c)
	}
	g.log.Info("Restored GKE state", "clusters", len(g.clusters), "operations", len(g.opList), "running", len(g.running))
	return nil
}

// save returns the state in Snapshot's format. Must be called with the
// lock held.
func (s *GServer) save() (savedState, error) {
	st := savedState{Version: snapshotVersion, Seq: s.seq, Endpoints: s.endpoints, Clusters: []savedCluster{}, Operations: []savedOp{}}
	keys := slices.SortedFunc(maps.Keys(s.clusters), func(a, b clusterKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		c := s.clusters[k]
		sc := savedCluster{Key: c.key.String(), Region: c.region, ErrMsg: c.errMsg, Pools: []savedPool{}}
		var err error
		if sc.Cluster, err = protojson.Marshal(c.pb); err != nil {
			return st, fmt.Errorf("cluster %s: %w", c.key, err)
		}
		for _, name := range c.order {
			np := c.pools[name]
			b, err := protojson.Marshal(np.pb)
			if err != nil {
				return st, fmt.Errorf("node pool %s/nodePools/%s: %w", c.key, name, err)
			}
			sc.Pools = append(sc.Pools, savedPool{Pool: b, UID: np.uid, Nodes: maps.Clone(np.nodes), Short: np.short.saved()})
		}
		if k := c.kube; k != nil {
			sc.Kubernetes = &savedKube{Port: k.lis.Addr().(*net.TCPAddr).Port, CACert: string(k.ca.CertPEM), CAKey: string(k.ca.KeyPEM), AdminToken: k.adminToken, Up: k.up}
		}
		st.Clusters = append(st.Clusters, sc)
	}
	for _, op := range s.opList {
		so, err := saveOp(op)
		if err != nil {
			return st, fmt.Errorf("operation %s: %w", op.pb.Name, err)
		}
		st.Operations = append(st.Operations, so)
	}
	return st, nil
}

func saveOp(op *operation) (savedOp, error) {
	so := savedOp{Cluster: op.c.key.String(), ClusterID: op.c.pb.Id, Pool: op.pool, UID: op.uid, Seq: op.seq, End: op.end, Lost: op.lost}
	var err error
	if so.Operation, err = protojson.Marshal(op.pb); err != nil {
		return so, err
	}
	if op.pb.Status == containerpb.Operation_DONE {
		return so, nil
	}
	if so.Fail, err = marshalOpt(op.fail); err != nil {
		return so, err
	}
	e := op.eff
	se := &savedEffect{RPC: e.rpc, Own: e.own, Version: e.version, Labels: maps.Clone(e.labels)}
	if se.Autoscaling, err = marshalOpt(e.autoscaling); err != nil {
		return so, err
	}
	if se.Update, err = marshalOpt(e.update); err != nil {
		return so, err
	}
	if se.Cluster, err = marshalOpt(e.cluster); err != nil {
		return so, err
	}
	if se.Maintenance, err = marshalOpt(e.maintenance); err != nil {
		return so, err
	}
	if se.Patch, err = marshalOpt(e.patch); err != nil {
		return so, err
	}
	for _, f := range e.fates {
		sf := savedFate{Pool: f.pool, UID: f.uid, Status: f.status.String(), Message: f.msg, Nodes: maps.Clone(f.nodes), Short: f.short.saved()}
		if sf.Fail, err = marshalOpt(f.fail); err != nil {
			return so, err
		}
		se.Fates = append(se.Fates, sf)
	}
	for _, b := range e.before {
		se.Before = append(se.Before, savedStatus{Pool: b.pool, UID: b.uid, Status: b.status.String(), Message: b.msg})
	}
	so.Effect = se
	return so, nil
}

// marshalOpt is protojson.Marshal, with nothing for a nil message.
func marshalOpt[M interface {
	comparable
	proto.Message
}](m M) (json.RawMessage, error) {
	var zero M
	if m == zero {
		return nil, nil
	}
	return protojson.Marshal(m)
}

// unmarshalOpt is protojson.Unmarshal into a new M, nil for nothing.
func unmarshalOpt[T any, M interface {
	*T
	proto.Message
}](b json.RawMessage) (M, error) {
	if len(b) == 0 {
		return nil, nil
	}
	m := M(new(T))
	if err := protojson.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// restored is a state read from a Snapshot, not yet the server's.
type restored struct {
	clusters map[clusterKey]*cluster
	kube     map[clusterKey]*savedKube
	ops      map[string]*operation
	opList   []*operation
	running  []*operation
}

func load(st savedState) (*restored, error) {
	r := &restored{clusters: map[clusterKey]*cluster{}, kube: map[clusterKey]*savedKube{}, ops: map[string]*operation{}}
	for _, sc := range st.Clusters {
		k, pool, err := parseNameArg(sc.Key)
		if err != nil || pool != "" {
			return nil, fmt.Errorf("cluster key %q", sc.Key)
		}
		if r.clusters[k] != nil {
			return nil, fmt.Errorf("cluster %s twice", k)
		}
		c := &cluster{key: k, region: sc.Region, errMsg: sc.ErrMsg, pools: map[string]*nodePool{}}
		if c.pb, err = unmarshalOpt[containerpb.Cluster](sc.Cluster); err != nil || c.pb == nil {
			return nil, fmt.Errorf("cluster %s: %v", k, err)
		}
		for _, sp := range sc.Pools {
			np := &nodePool{uid: sp.UID, nodes: maps.Clone(sp.Nodes), short: sp.Short.restore()}
			if np.pb, err = unmarshalOpt[containerpb.NodePool](sp.Pool); err != nil || np.pb == nil {
				return nil, fmt.Errorf("node pool of %s: %v", k, err)
			}
			if np.nodes == nil {
				np.nodes = map[string]int32{}
			}
			if c.pools[np.pb.Name] != nil {
				return nil, fmt.Errorf("node pool %s/nodePools/%s twice", k, np.pb.Name)
			}
			c.pools[np.pb.Name] = np
			c.order = append(c.order, np.pb.Name)
		}
		r.clusters[k] = c
		if sc.Kubernetes != nil {
			r.kube[k] = sc.Kubernetes
		}
	}
	for _, so := range st.Operations {
		op, err := loadOp(r, so)
		if err != nil {
			return nil, err
		}
		if r.ops[op.pb.Name] != nil {
			return nil, fmt.Errorf("operation %s twice", op.pb.Name)
		}
		r.ops[op.pb.Name] = op
		r.opList = append(r.opList, op)
		if op.pb.Status != containerpb.Operation_DONE {
			r.running = append(r.running, op)
			op.c.running = append(op.c.running, op)
		}
	}
	return r, nil
}

func loadOp(r *restored, so savedOp) (*operation, error) {
	pb, err := unmarshalOpt[containerpb.Operation](so.Operation)
	if err != nil || pb == nil {
		return nil, fmt.Errorf("operation: %v", err)
	}
	k, pool, err := parseNameArg(so.Cluster)
	if err != nil || pool != "" {
		return nil, fmt.Errorf("operation %s: cluster key %q", pb.Name, so.Cluster)
	}
	op := &operation{pb: pb, parent: parentKey{k.project, k.location}, pool: so.Pool, uid: so.UID,
		clusterLevel: so.Pool == "", seq: so.Seq, end: so.End, lost: so.Lost}
	op.c = r.clusters[k]
	if op.c == nil || op.c.pb.Id != so.ClusterID {
		// A finished operation on a cluster that has gone since.
		op.c = &cluster{key: k, pb: &containerpb.Cluster{Id: so.ClusterID}, pools: map[string]*nodePool{}, gone: true}
	}
	if pb.Status == containerpb.Operation_DONE {
		return op, nil
	}
	if op.c.gone || so.Effect == nil {
		return nil, fmt.Errorf("running operation %s without its cluster or effect", pb.Name)
	}
	if op.fail, err = unmarshalOpt[spb.Status](so.Fail); err != nil {
		return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
	}
	se := so.Effect
	op.eff = effect{rpc: se.RPC, own: se.Own, version: se.Version, labels: maps.Clone(se.Labels)}
	if op.eff.autoscaling, err = unmarshalOpt[containerpb.NodePoolAutoscaling](se.Autoscaling); err != nil {
		return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
	}
	if op.eff.update, err = unmarshalOpt[containerpb.UpdateNodePoolRequest](se.Update); err != nil {
		return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
	}
	if op.eff.cluster, err = unmarshalOpt[containerpb.ClusterUpdate](se.Cluster); err != nil {
		return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
	}
	if op.eff.maintenance, err = unmarshalOpt[containerpb.MaintenancePolicy](se.Maintenance); err != nil {
		return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
	}
	if se.RPC == "SetMaintenancePolicy" && op.eff.maintenance == nil {
		op.eff.maintenance = &containerpb.MaintenancePolicy{}
	}
	if op.eff.patch, err = unmarshalOpt[containerpb.Cluster](se.Patch); err != nil {
		return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
	}
	if (se.RPC == "SetNodePoolAutoscaling" && op.eff.autoscaling == nil) || (se.RPC == "UpdateNodePool" && op.eff.update == nil) {
		return nil, fmt.Errorf("operation %s: %s without its request", pb.Name, se.RPC)
	}
	for _, sf := range se.Fates {
		f := fate{pool: sf.Pool, uid: sf.UID, msg: sf.Message, nodes: maps.Clone(sf.Nodes), short: sf.Short.restore()}
		if f.status, err = poolStatusValue(sf.Status); err != nil {
			return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
		}
		if f.fail, err = unmarshalOpt[spb.Status](sf.Fail); err != nil {
			return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
		}
		op.eff.fates = append(op.eff.fates, f)
	}
	for _, sb := range se.Before {
		b := poolStatus{pool: sb.Pool, uid: sb.UID, msg: sb.Message}
		if b.status, err = poolStatusValue(sb.Status); err != nil {
			return nil, fmt.Errorf("operation %s: %w", pb.Name, err)
		}
		op.eff.before = append(op.eff.before, b)
	}
	return op, nil
}

func poolStatusValue(name string) (containerpb.NodePool_Status, error) {
	v, ok := containerpb.NodePool_Status_value[name]
	if !ok {
		return 0, fmt.Errorf("node pool status %q", name)
	}
	return containerpb.NodePool_Status(v), nil
}
