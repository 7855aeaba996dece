package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/better-compute/kubernetes/shared/client"
	"github.com/better-compute/kubernetes/shared/input"
)

// defaultMode is a cluster's mode when the configuration names none.
const defaultMode = client.ModeStandard

type clusterResource struct{ api *apiClient }

// clusterModel is the resource bettercompute_kubernetes_cluster.
type clusterModel struct {
	clusterAttrs
	// NodePools are the cluster's first node pools, as configured: the
	// API has no cluster update, so they are only ever sent at create
	// (the node pool resource manages the pools added after).
	NodePools types.List     `tfsdk:"node_pool"`
	Timeouts  timeouts.Value `tfsdk:"timeouts"`
}

func (r *clusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kubernetes_cluster"
}

func (r *clusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c, err := clientFrom(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
		return
	}
	r.api = c
}

func (r *clusterResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	computed := func(desc string, keep bool) schema.StringAttribute {
		a := schema.StringAttribute{Computed: true, Description: desc}
		if keep {
			a.PlanModifiers = keepString
		}
		return a
	}
	keepReplace := []planmodifier.String{stringplanmodifier.UseStateForUnknown(), stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A managed Kubernetes cluster on a provider pool (API.md §6). The API has no cluster update: every argument replaces the cluster.",
		Attributes: map[string]schema.Attribute{
			"id":        computed("The cluster's ID (kcl_...).", true),
			"tenant_id": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepReplace, Description: "The tenant. Default: the provider's tenant."},
			"pool_id":   schema.StringAttribute{Required: true, PlanModifiers: replaceString, Description: "The provider pool: its account hosts the cluster."},
			"name":      schema.StringAttribute{Required: true, PlanModifiers: replaceString, Description: "Name, unique among the tenant's clusters."},
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultMode), PlanModifiers: replaceString,
				Description: "standard (node pools of the tenant's) or autopilot (the provider runs the nodes). Default standard."},
			"region":          schema.StringAttribute{Required: true, PlanModifiers: replaceString, Description: "One of the account's regions."},
			"release_channel": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keepReplace, Description: "rapid, regular or stable. Default: the API's (regular)."},
			"labels": schema.MapAttribute{Optional: true, Computed: true, ElementType: types.StringType, PlanModifiers: replaceMap,
				Default: mapdefault.StaticValue(types.MapValueMust(types.StringType, map[string]attr.Value{})), Description: "Labels of the cluster."},
			"account_id":         computed("The provider account that hosts it.", true),
			"kubernetes_version": computed("The Kubernetes version the provider runs.", false),
			"endpoint":           computed("The Kubernetes API's address.", false),
			"provider_name":      computed("The provider-side name, derived from the ID.", true),
			"managed_by":         computed(descManagedBy, false),
			"state":              computed(descState, false),
			"message":            computed(descMessage, false),
			"version":            schema.Int64Attribute{Computed: true, Description: "Starts at 1, one more at every change."},
			"created_at":         computed("When it was created (RFC 3339).", true),
			"updated_at":         computed("When it last changed (RFC 3339).", false),
		},
		Blocks: map[string]schema.Block{
			"node_pool": schema.ListNestedBlock{
				Description:   "A first node pool of a standard cluster (1 to 10; none for autopilot): the arguments of bettercompute_kubernetes_node_pool without tenant_id and cluster_id. Changing one replaces the cluster; add pools later with bettercompute_kubernetes_node_pool.",
				NestedObject:  schema.NestedBlockObject{Attributes: poolSpecAttributes(false)},
				PlanModifiers: replaceList,
			},
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Delete: true}),
		},
	}
}

func (r *clusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m clusterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(validateCluster(ctx, m)...)
}

// clusterCreate is the create request of a planned cluster, without its key.
func clusterCreate(ctx context.Context, tenant string, m clusterModel) (client.CreateClusterRequest, diag.Diagnostics) {
	req := client.CreateClusterRequest{
		TenantID:       tenant,
		PoolID:         m.PoolID.ValueString(),
		Name:           m.Name.ValueString(),
		Mode:           m.Mode.ValueString(),
		Region:         m.Region.ValueString(),
		ReleaseChannel: m.ReleaseChannel.ValueString(),
	}
	var diags diag.Diagnostics
	if !m.Labels.IsNull() && !m.Labels.IsUnknown() {
		diags.Append(m.Labels.ElementsAs(ctx, &req.Labels, false)...)
	}
	var pools []specModel
	if !m.NodePools.IsNull() && !m.NodePools.IsUnknown() {
		diags.Append(m.NodePools.ElementsAs(ctx, &pools, false)...)
	}
	for _, p := range pools {
		s, d := p.toSpec(ctx)
		diags.Append(d...)
		req.NodePools = append(req.NodePools, s)
	}
	return req, diags
}

func (r *clusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan clusterModel
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
	creq, diags := clusterCreate(ctx, tenant, plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	canonical, err := canonicalForm(creq, input.DecodeCreateCluster)
	if err != nil {
		resp.Diagnostics.AddError("Invalid cluster", err.Error())
		return
	}
	createAndWait(&resp.Diagnostics, "cluster", "cluster", canonical,
		func(key string) (answer[client.Cluster], error) {
			creq.IdempotencyKey = key
			c, err := r.api.CreateCluster(ctx, creq)
			if err != nil {
				return answer[client.Cluster]{}, err
			}
			return answer[client.Cluster]{c, c.ID, string(c.State)}, nil
		},
		func(c *client.Cluster) {
			resp.Diagnostics.Append(resp.State.Set(ctx, clusterModel{clusterAttrs: clusterFrom(c), NodePools: plan.NodePools, Timeouts: plan.Timeouts})...)
		},
		func(c *client.Cluster) (*client.Cluster, error) {
			got, err := r.api.WaitCluster(ctx, tenant, c.ID, client.StateReady, nil)
			return got, r.poolErrors(ctx, tenant, c.ID, err)
		})
}

// poolErrors adds to a cluster's FailedError the messages of its pools in
// state error: the cluster's own names the pool at best, theirs say why.
func (r *clusterResource) poolErrors(ctx context.Context, tenant, clusterID string, err error) error {
	var failed *client.FailedError
	if !errors.As(err, &failed) {
		return err
	}
	pools, lerr := r.api.ListNodePools(ctx, tenant, clusterID)
	if lerr != nil {
		return err
	}
	msgs := []string{}
	if failed.Message != "" {
		msgs = append(msgs, failed.Message)
	}
	for _, p := range pools {
		if p.State == client.StateError {
			msgs = append(msgs, fmt.Sprintf("node pool %s: %s", p.Name, p.Message))
		}
	}
	f := *failed
	f.Message = strings.Join(msgs, "\n")
	return &f
}

func (r *clusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state clusterModel
	tenant, ok := readTenant(ctx, req.State, &resp.Diagnostics, r.api, &state, &state.TenantID)
	if !ok {
		return
	}
	cl, err := r.api.GetCluster(ctx, tenant, state.ID.ValueString())
	if client.IsCode(err, client.CodeNotFound) || (err == nil && cl.State == client.StateDeleted) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the cluster", err.Error())
		return
	}
	pools := state.NodePools
	if pools.IsNull() {
		// Imported: the first pools are those made with the cluster, in
		// its create's transaction (the same createdAt), not those added
		// since, which bettercompute_kubernetes_node_pool resources hold.
		got, err := r.api.ListNodePools(ctx, tenant, cl.ID)
		if err != nil {
			resp.Diagnostics.AddError("Cannot read the cluster's node pools", err.Error())
			return
		}
		pools = blockPools(firstPools(cl, got))
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, clusterModel{clusterAttrs: clusterFrom(cl), NodePools: pools, Timeouts: state.Timeouts})...)
}

// firstPools are the pools made with the cluster.
func firstPools(cl *client.Cluster, pools []client.NodePool) []client.NodePool {
	var first []client.NodePool
	for _, p := range pools {
		if p.CreatedAt.Equal(cl.CreatedAt) {
			first = append(first, p)
		}
	}
	return first
}

// blockPools are pools as node_pool blocks would be written: what the API
// answers for an argument not given (false, empty) is null.
func blockPools(pools []client.NodePool) types.List {
	elems := make([]attr.Value, len(pools))
	for i := range pools {
		s := specFrom(&pools[i])
		if !pools[i].Spot {
			s.Spot = types.BoolNull()
		}
		if len(pools[i].Zones) == 0 {
			s.Zones = types.ListNull(types.StringType)
		}
		if len(pools[i].Labels) == 0 {
			s.Labels = types.MapNull(types.StringType)
		}
		if len(pools[i].Taints) == 0 {
			s.Taints = types.ListNull(taintType)
		} else {
			taints := make([]attr.Value, len(pools[i].Taints))
			for j, t := range pools[i].Taints {
				taints[j] = types.ObjectValueMust(taintType.AttrTypes, map[string]attr.Value{
					"key": types.StringValue(t.Key), "value": optString(t.Value), "effect": types.StringValue(t.Effect)})
			}
			s.Taints = types.ListValueMust(taintType, taints)
		}
		elems[i] = types.ObjectValueMust(specTypes, map[string]attr.Value{
			"name": s.Name, "machine_type": s.MachineType, "node_count": s.NodeCount, "autoscaling": s.Autoscaling,
			"disk_gib": s.DiskGiB, "disk_type": s.DiskType, "spot": s.Spot, "accelerators": s.Accelerators,
			"zones": s.Zones, "labels": s.Labels, "taints": s.Taints,
		})
	}
	return types.ListValueMust(types.ObjectType{AttrTypes: specTypes}, elems)
}

// Update changes nothing at the API (every argument replaces the
// cluster): only the timeouts can change in place.
func (r *clusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state clusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	state.Timeouts = plan.Timeouts
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

func (r *clusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state clusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tenant, id := state.TenantID.ValueString(), state.ID.ValueString()
	deleteAndWait(&resp.Diagnostics, "cluster", id,
		func() error { _, err := r.api.DeleteCluster(ctx, tenant, id); return err },
		func() error { _, err := r.api.WaitCluster(ctx, tenant, id, client.StateDeleted, nil); return err })
}

func (r *clusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ref, ok := parseClusterImport(req.ID)
	if !ok {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: want CLUSTER_ID or TENANT/CLUSTER_ID (kcl_...)", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), ref.clusterID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("tenant_id"), r.api.importTenant(ref))...)
}

func (r *clusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	planTenant(ctx, r.api, req, resp)
}
