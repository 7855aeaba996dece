package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/input"
)

// Default timeouts of the waits, when the timeouts block says nothing.
const (
	defaultCreateTimeout = 30 * time.Minute
	defaultUpdateTimeout = 30 * time.Minute
	defaultDeleteTimeout = 30 * time.Minute
)

var (
	_ resource.ResourceWithConfigure      = (*nodePoolResource)(nil)
	_ resource.ResourceWithImportState    = (*nodePoolResource)(nil)
	_ resource.ResourceWithValidateConfig = (*nodePoolResource)(nil)
	_ resource.ResourceWithConfigure      = (*clusterResource)(nil)
	_ resource.ResourceWithImportState    = (*clusterResource)(nil)
	_ resource.ResourceWithValidateConfig = (*clusterResource)(nil)
)

type nodePoolResource struct{ api *apiClient }

// nodePoolModel is the resource bettercompute_kubernetes_node_pool.
type nodePoolModel struct {
	nodePoolAttrs
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

func (r *nodePoolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kubernetes_node_pool"
}

func (r *nodePoolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c, err := clientFrom(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	r.api = c
}

// replace is the plan modifier of every attribute a node pool cannot
// change in place (API.md §5: update resizes, nothing else).
var (
	replaceString = []planmodifier.String{stringplanmodifier.RequiresReplace()}
	replaceInt64  = []planmodifier.Int64{int64planmodifier.RequiresReplace()}
	replaceBool   = []planmodifier.Bool{boolplanmodifier.RequiresReplace()}
	replaceList   = []planmodifier.List{listplanmodifier.RequiresReplace()}
	replaceMap    = []planmodifier.Map{mapplanmodifier.RequiresReplace()}
	replaceObject = []planmodifier.Object{objectplanmodifier.RequiresReplace()}
	keepString    = []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
)

// Descriptions shared by the resources and data sources.
const (
	descNodeCount    = "Nodes per zone; with autoscaling, the initial count. Changes in place."
	descAutoscaling  = "Bounds of the node count per zone. Changes in place; removing it turns autoscaling off."
	descState        = "pending, provisioning (clusters), ready, updating, deleting, deleted or error."
	descMessage      = "Why the resource is in state error, or what it waits for."
	descManagedBy    = "The substrate that manages it, if any: it can be read but not changed."
	descCurrentCount = "The nodes the provider runs for the pool in all its zones, once observed."
)

func autoscalingAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"min_nodes": schema.Int64Attribute{Required: true, Description: "Fewest nodes per zone."},
		"max_nodes": schema.Int64Attribute{Required: true, Description: "Most nodes per zone."},
	}
}

func acceleratorsAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"type":  schema.StringAttribute{Required: true, Description: "Accelerator type (nvidia-l4)."},
		"count": schema.Int64Attribute{Required: true, Description: "Accelerators per node."},
	}
}

// taintAttributes are a taint's. pool: value defaults to "", as the API
// answers a taint given without one.
func taintAttributes(pool bool) map[string]schema.Attribute {
	value := schema.StringAttribute{Optional: true, Description: "Taint value."}
	if pool {
		value.Computed, value.Default = true, stringdefault.StaticString("")
	}
	return map[string]schema.Attribute{
		"key":    schema.StringAttribute{Required: true, Description: "Taint key: a Kubernetes qualified name."},
		"value":  value,
		"effect": schema.StringAttribute{Required: true, Description: "NoSchedule, PreferNoSchedule or NoExecute."},
	}
}

// poolSpecAttributes are the attributes of a node pool spec. pool: as the
// node pool resource has them (defaults, and every one but node_count and
// autoscaling forcing a replacement); else as a cluster's node_pool block
// has them (the block as a whole forces the replacement, and holds the
// configuration as written).
func poolSpecAttributes(pool bool) map[string]schema.Attribute {
	a := map[string]schema.Attribute{
		"name":         schema.StringAttribute{Required: true, Description: "Name, unique among the cluster's pools; also the provider-side name."},
		"machine_type": schema.StringAttribute{Required: true, Description: "The provider's machine type (e2-standard-4)."},
		"node_count":   schema.Int64Attribute{Required: true, Description: descNodeCount},
		"autoscaling":  schema.SingleNestedAttribute{Optional: true, Attributes: autoscalingAttributes(), Description: descAutoscaling},
		"disk_gib":     schema.Int64Attribute{Optional: true, Description: "Boot disk size of each node, in GiB."},
		"disk_type":    schema.StringAttribute{Optional: true, Description: "Boot disk type (pd-balanced)."},
		"spot":         schema.BoolAttribute{Optional: true, Description: "Spot VMs. Default false."},
		"accelerators": schema.SingleNestedAttribute{Optional: true, Attributes: acceleratorsAttributes(), Description: "GPUs attached to each node."},
		"zones":        schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Zones of the cluster's region; none: the provider's default."},
		"labels":       schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Kubernetes labels of every node."},
		"taints":       schema.ListNestedAttribute{Optional: true, NestedObject: schema.NestedAttributeObject{Attributes: taintAttributes(false)}, Description: "Kubernetes taints of every node."},
	}
	if !pool {
		return a
	}
	a["name"] = schema.StringAttribute{Required: true, PlanModifiers: replaceString, Description: "Name, unique among the cluster's pools; also the provider-side name."}
	a["machine_type"] = schema.StringAttribute{Required: true, PlanModifiers: replaceString, Description: "The provider's machine type (e2-standard-4)."}
	a["disk_gib"] = schema.Int64Attribute{Optional: true, PlanModifiers: replaceInt64, Description: "Boot disk size of each node, in GiB."}
	a["disk_type"] = schema.StringAttribute{Optional: true, PlanModifiers: replaceString, Description: "Boot disk type (pd-balanced)."}
	a["spot"] = schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false), PlanModifiers: replaceBool, Description: "Spot VMs. Default false."}
	a["accelerators"] = schema.SingleNestedAttribute{Optional: true, Attributes: acceleratorsAttributes(), PlanModifiers: replaceObject, Description: "GPUs attached to each node."}
	a["zones"] = schema.ListAttribute{Optional: true, Computed: true, ElementType: types.StringType, PlanModifiers: replaceList,
		Default: listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{})), Description: "Zones of the cluster's region; none: the provider's default."}
	a["labels"] = schema.MapAttribute{Optional: true, Computed: true, ElementType: types.StringType, PlanModifiers: replaceMap,
		Default: mapdefault.StaticValue(types.MapValueMust(types.StringType, map[string]attr.Value{})), Description: "Kubernetes labels of every node."}
	a["taints"] = schema.ListNestedAttribute{Optional: true, Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: taintAttributes(true)}, PlanModifiers: replaceList,
		Default: listdefault.StaticValue(types.ListValueMust(taintType, []attr.Value{})), Description: "Kubernetes taints of every node."}
	return a
}

func (r *nodePoolResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	a := poolSpecAttributes(true)
	a["id"] = schema.StringAttribute{Computed: true, PlanModifiers: keepString, Description: "The node pool's ID (knp_...)."}
	a["tenant_id"] = schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: append([]planmodifier.String{stringplanmodifier.UseStateForUnknown()}, replaceString...),
		Description: "The tenant. Default: the provider's tenant."}
	a["cluster_id"] = schema.StringAttribute{Required: true, PlanModifiers: replaceString, Description: "The cluster (kcl_...)."}
	a["current_node_count"] = schema.Int64Attribute{Computed: true, Description: descCurrentCount}
	a["managed_by"] = schema.StringAttribute{Computed: true, Description: descManagedBy}
	a["state"] = schema.StringAttribute{Computed: true, Description: descState}
	a["message"] = schema.StringAttribute{Computed: true, Description: descMessage}
	a["version"] = schema.Int64Attribute{Computed: true, Description: "Starts at 1, one more at every accepted update."}
	a["created_at"] = schema.StringAttribute{Computed: true, PlanModifiers: keepString, Description: "When it was created (RFC 3339)."}
	a["updated_at"] = schema.StringAttribute{Computed: true, Description: "When it last changed (RFC 3339)."}
	resp.Schema = schema.Schema{
		Description: "A node pool of a standard cluster (API.md §5). node_count and autoscaling change in place; every other argument replaces the pool.",
		Attributes:  a,
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

func (r *nodePoolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m nodePoolModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(validateNodePool(m)...)
}

// nodePoolCreate is the create request of a planned pool, without its key.
func nodePoolCreate(ctx context.Context, tenant string, m nodePoolModel) (client.CreateNodePoolRequest, diag.Diagnostics) {
	spec, diags := m.specModel.toSpec(ctx)
	return client.CreateNodePoolRequest{TenantID: tenant, ClusterID: m.ClusterID.ValueString(), NodePoolSpec: spec}, diags
}

// canonicalForm is the API's canonical form of a create request (the
// cluster's or the node pool's), decoded as the API decodes it: what the
// idempotency key is made of (the form leaves the key out).
func canonicalForm[Req any, D interface{ Canonical() []byte }](req Req, decode func([]byte) (D, error)) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	d, err := decode(body)
	if err != nil {
		return nil, err
	}
	return d.Canonical(), nil
}

func (r *nodePoolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan nodePoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tenant, err := r.api.tenantOf(plan.TenantID)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("tenant_id"), "No tenant", err.Error())
		return
	}
	timeout, diags := plan.Timeouts.Create(ctx, defaultCreateTimeout)
	resp.Diagnostics.Append(diags...)
	creq, diags := nodePoolCreate(ctx, tenant, plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	canonical, err := canonicalForm(creq, input.DecodeCreateNodePool)
	if err != nil {
		resp.Diagnostics.AddError("Invalid node pool", err.Error())
		return
	}
	createAndWait(&resp.Diagnostics, "node pool", "nodepool", canonical,
		func(key string) (answer[client.NodePool], error) {
			creq.IdempotencyKey = key
			p, err := r.api.CreateNodePool(ctx, creq)
			if err != nil {
				return answer[client.NodePool]{}, err
			}
			return answer[client.NodePool]{p, p.ID, string(p.State)}, nil
		},
		func(p *client.NodePool) { r.save(ctx, &resp.State, &resp.Diagnostics, p, plan.Timeouts) },
		func(p *client.NodePool) (*client.NodePool, error) {
			return r.api.WaitNodePool(ctx, tenant, p.ClusterID, p.ID, client.StateReady, nil)
		})
}

// createAndWait makes a resource of kind once (createOnce, its keys made
// with keyKind), then waits until it is ready. It is tracked (save) before
// the wait, so a wait that fails or times out leaves a resource OpenTofu
// knows (tainted), not an orphan; and again with what the wait last saw.
func createAndWait[T any](diags *diag.Diagnostics, kind, keyKind string, canonical []byte,
	create func(key string) (answer[T], error), save func(*T), wait func(*T) (*T, error)) {
	var id string // the ID of what create last answered: the one made
	made, err := createOnce(keyKind, canonical, func(key string) (answer[T], error) {
		a, err := create(key)
		id = a.id
		return a, err
	})
	if err != nil {
		diags.AddError("Cannot create the "+kind, err.Error())
		return
	}
	save(made)
	got, err := wait(made)
	if got != nil {
		save(got)
	}
	if err != nil {
		addWaitError(diags, kind, id, client.StateReady, err)
	}
}

// save puts the pool the API answered into state.
func (r *nodePoolResource) save(ctx context.Context, state stateSetter, diags *diag.Diagnostics, p *client.NodePool, t timeouts.Value) {
	diags.Append(state.Set(ctx, nodePoolModel{nodePoolAttrs: nodePoolFrom(p), Timeouts: t})...)
}

// stateSetter is the state of a response (tfsdk.State).
type stateSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}

// addWaitError reports a wait that did not end in target: the
// resource's own message when it went error.
func addWaitError(diags *diag.Diagnostics, kind, id string, target client.State, err error) {
	var failed *client.FailedError
	if errors.As(err, &failed) {
		msg := failed.Message
		if msg == "" {
			msg = "The API gives no message."
		}
		diags.AddError(fmt.Sprintf("The %s %s (%s) is in state error", kind, failed.Name, id), msg)
		return
	}
	diags.AddError(fmt.Sprintf("The %s %s did not become %s", kind, id, target), err.Error())
}

func (r *nodePoolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state nodePoolModel
	tenant, ok := readTenant(ctx, req.State, &resp.Diagnostics, r.api, &state, &state.TenantID)
	if !ok {
		return
	}
	// There is no kubernetesNodePools.get: the pool is read from its
	// cluster's list, where a pool that is gone is missing.
	pools, err := r.api.ListNodePools(ctx, tenant, state.ClusterID.ValueString())
	if client.IsCode(err, client.CodeNotFound) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the node pool", err.Error())
		return
	}
	for i := range pools {
		if pools[i].ID == state.ID.ValueString() {
			r.save(ctx, &resp.State, &resp.Diagnostics, &pools[i], state.Timeouts)
			return
		}
	}
	resp.State.RemoveResource(ctx)
}

func (r *nodePoolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state nodePoolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := plan.Timeouts.Update(ctx, defaultUpdateTimeout)
	resp.Diagnostics.Append(diags...)
	ureq := client.UpdateNodePoolRequest{TenantID: state.TenantID.ValueString(), ClusterID: state.ClusterID.ValueString(), NodePoolID: state.ID.ValueString()}
	if !plan.NodeCount.Equal(state.NodeCount) {
		n := int(plan.NodeCount.ValueInt64())
		ureq.NodeCount = &n
	}
	if !plan.Autoscaling.Equal(state.Autoscaling) {
		if plan.Autoscaling.IsNull() {
			ureq.DisableAutoscaling = true
		} else {
			var a autoscalingModel
			resp.Diagnostics.Append(plan.Autoscaling.As(ctx, &a, basetypes.ObjectAsOptions{})...)
			ureq.Autoscaling = &client.Autoscaling{MinNodes: int(a.MinNodes.ValueInt64()), MaxNodes: int(a.MaxNodes.ValueInt64())}
		}
	}
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var pool *client.NodePool
	if ureq.NodeCount != nil || ureq.Autoscaling != nil || ureq.DisableAutoscaling {
		var err error
		if pool, err = r.api.UpdateNodePool(ctx, ureq); err != nil {
			resp.Diagnostics.AddError("Cannot update the node pool", err.Error())
			return
		}
		r.save(ctx, &resp.State, &resp.Diagnostics, pool, plan.Timeouts)
	}
	got, err := r.api.WaitNodePool(ctx, ureq.TenantID, ureq.ClusterID, ureq.NodePoolID, client.StateReady, nil)
	if got != nil {
		r.save(ctx, &resp.State, &resp.Diagnostics, got, plan.Timeouts)
	}
	if err != nil {
		addWaitError(&resp.Diagnostics, "node pool", ureq.NodePoolID, client.StateReady, err)
	}
}

func (r *nodePoolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state nodePoolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tenant, cluster, id := state.TenantID.ValueString(), state.ClusterID.ValueString(), state.ID.ValueString()
	deleteAndWait(&resp.Diagnostics, "node pool", id,
		func() error { _, err := r.api.DeleteNodePool(ctx, tenant, cluster, id); return err },
		func() error {
			_, err := r.api.WaitNodePool(ctx, tenant, cluster, id, client.StateDeleted, nil)
			return err
		})
}

// deleteAndWait deletes a resource of kind and waits until it is gone: a
// resource already gone is deleted, not an error.
func deleteAndWait(diags *diag.Diagnostics, kind, id string, del, wait func() error) {
	if err := del(); err != nil {
		if client.IsCode(err, client.CodeNotFound) {
			return
		}
		diags.AddError("Cannot delete the "+kind, err.Error())
		return
	}
	if err := wait(); err != nil && !client.IsCode(err, client.CodeNotFound) {
		addWaitError(diags, kind, id, client.StateDeleted, err)
	}
}

func (r *nodePoolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ref, ok := parseNodePoolImport(req.ID)
	if !ok {
		resp.Diagnostics.AddError("Invalid import ID",
			fmt.Sprintf("%q: want CLUSTER_ID/NODE_POOL_ID or TENANT/CLUSTER_ID/NODE_POOL_ID (kcl_.../knp_...)", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), ref.nodePoolID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster_id"), ref.clusterID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("tenant_id"), r.api.importTenant(ref))...)
}

func (r *nodePoolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	planTenant(ctx, r.api, req, resp)
}
