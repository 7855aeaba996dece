package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/better-compute/kubernetes/shared/client"
)

// computedAttributes are read-only attributes of the given types, nested
// ones included.
func computedAttributes(ts map[string]attr.Type) map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for name, t := range ts {
		out[name] = computedAttribute(t)
	}
	return out
}

func computedAttribute(t attr.Type) schema.Attribute {
	switch t := t.(type) {
	case types.ObjectType:
		return schema.SingleNestedAttribute{Computed: true, Attributes: computedAttributes(t.AttrTypes)}
	case types.ListType:
		if o, ok := t.ElemType.(types.ObjectType); ok {
			return schema.ListNestedAttribute{Computed: true, NestedObject: schema.NestedAttributeObject{Attributes: computedAttributes(o.AttrTypes)}}
		}
		return schema.ListAttribute{Computed: true, ElementType: t.ElemType}
	case types.MapType:
		return schema.MapAttribute{Computed: true, ElementType: t.ElemType}
	}
	switch t {
	case types.Int64Type:
		return schema.Int64Attribute{Computed: true}
	case types.BoolType:
		return schema.BoolAttribute{Computed: true}
	}
	return schema.StringAttribute{Computed: true}
}

// tenantAttribute is the optional tenant_id of every data source.
var tenantAttribute = schema.StringAttribute{Optional: true, Computed: true, Description: "The tenant. Default: the provider's tenant."}

// clusterAttrTypes are the attribute types of clusterAttrs.
var clusterAttrTypes = map[string]attr.Type{
	"id": types.StringType, "tenant_id": types.StringType, "pool_id": types.StringType, "account_id": types.StringType,
	"name": types.StringType, "mode": types.StringType, "region": types.StringType, "release_channel": types.StringType,
	"kubernetes_version": types.StringType, "endpoint": types.StringType, "provider_name": types.StringType,
	"labels": types.MapType{ElemType: types.StringType}, "managed_by": types.StringType, "state": types.StringType,
	"message": types.StringType, "version": types.Int64Type, "created_at": types.StringType, "updated_at": types.StringType,
}

func configureDataSource(req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) *apiClient {
	c, err := clientFrom(req.ProviderData)
	if err != nil {
		resp.Diagnostics.AddError("Provider not configured", err.Error())
	}
	return c
}

// getter is a request's configuration, plan or state (tfsdk.Config,
// tfsdk.Plan, tfsdk.State).
type getter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

// readTenant reads src into m, and the tenant its tenant_id (one of m's
// fields) names, or the provider's; false when either failed (in diags).
func readTenant(ctx context.Context, src getter, diags *diag.Diagnostics, api *apiClient, m any, tenantID *types.String) (string, bool) {
	diags.Append(src.Get(ctx, m)...)
	if diags.HasError() {
		return "", false
	}
	tenant, err := api.tenantOf(*tenantID)
	if err != nil {
		diags.AddError("No tenant", err.Error())
		return "", false
	}
	return tenant, true
}

// clusterDataSource is bettercompute_kubernetes_cluster: a cluster by ID.
type clusterDataSource struct{ api *apiClient }

func (d *clusterDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kubernetes_cluster"
}

func (d *clusterDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configureDataSource(req, resp)
}

func (d *clusterDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	a := computedAttributes(clusterAttrTypes)
	a["id"] = schema.StringAttribute{Required: true, Description: "The cluster's ID (kcl_...)."}
	a["tenant_id"] = tenantAttribute
	resp.Schema = schema.Schema{Description: "A cluster (kubernetesClusters.get).", Attributes: a}
}

func (d *clusterDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m clusterAttrs
	tenant, ok := readTenant(ctx, req.Config, &resp.Diagnostics, d.api, &m, &m.TenantID)
	if !ok {
		return
	}
	cl, err := d.api.GetCluster(ctx, tenant, m.ID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the cluster", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, clusterFrom(cl))...)
}

// nodePoolsDataSource is bettercompute_kubernetes_node_pools: a
// cluster's node pools that are not deleted, oldest first.
type nodePoolsDataSource struct{ api *apiClient }

type nodePoolsModel struct {
	TenantID  types.String    `tfsdk:"tenant_id"`
	ClusterID types.String    `tfsdk:"cluster_id"`
	NodePools []nodePoolAttrs `tfsdk:"node_pools"`
}

func (d *nodePoolsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kubernetes_node_pools"
}

func (d *nodePoolsDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configureDataSource(req, resp)
}

func (d *nodePoolsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A cluster's node pools that are not deleted, oldest first (kubernetesNodePools.list).",
		Attributes: map[string]schema.Attribute{
			"tenant_id":  tenantAttribute,
			"cluster_id": schema.StringAttribute{Required: true, Description: "The cluster (kcl_...)."},
			"node_pools": schema.ListNestedAttribute{Computed: true, Description: "The pools, with the attributes of bettercompute_kubernetes_node_pool.",
				NestedObject: schema.NestedAttributeObject{Attributes: computedAttributes(nodePoolAttrTypes())}},
		},
	}
}

func (d *nodePoolsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodePoolsModel
	tenant, ok := readTenant(ctx, req.Config, &resp.Diagnostics, d.api, &m, &m.TenantID)
	if !ok {
		return
	}
	pools, err := d.api.ListNodePools(ctx, tenant, m.ClusterID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot list the node pools", err.Error())
		return
	}
	m.TenantID = types.StringValue(tenant)
	m.NodePools = make([]nodePoolAttrs, len(pools))
	for i := range pools {
		m.NodePools[i] = nodePoolFrom(&pools[i])
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

// substrateDataSource is bettercompute_kubernetes_substrate: a pool's
// substrate by ID (API.md §9).
type substrateDataSource struct{ api *apiClient }

var substrateNodePoolType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"flavor": types.StringType, "name": types.StringType, "node_pool_id": types.StringType, "state": types.StringType,
}}

var substrateAttrTypes = map[string]attr.Type{
	"id": types.StringType, "tenant_id": types.StringType, "pool_id": types.StringType, "pool_version": types.Int64Type,
	"account_id": types.StringType, "mode": types.StringType, "cluster_id": types.StringType,
	"node_pools": types.ListType{ElemType: substrateNodePoolType}, "joined_nodes": types.Int64Type,
	"state": types.StringType, "message": types.StringType, "created_at": types.StringType, "updated_at": types.StringType,
}

type substrateNodePoolModel struct {
	Flavor     types.String `tfsdk:"flavor"`
	Name       types.String `tfsdk:"name"`
	NodePoolID types.String `tfsdk:"node_pool_id"`
	State      types.String `tfsdk:"state"`
}

type substrateModel struct {
	ID          types.String             `tfsdk:"id"`
	TenantID    types.String             `tfsdk:"tenant_id"`
	PoolID      types.String             `tfsdk:"pool_id"`
	PoolVersion types.Int64              `tfsdk:"pool_version"`
	AccountID   types.String             `tfsdk:"account_id"`
	Mode        types.String             `tfsdk:"mode"`
	ClusterID   types.String             `tfsdk:"cluster_id"`
	NodePools   []substrateNodePoolModel `tfsdk:"node_pools"`
	JoinedNodes types.Int64              `tfsdk:"joined_nodes"`
	State       types.String             `tfsdk:"state"`
	Message     types.String             `tfsdk:"message"`
	CreatedAt   types.String             `tfsdk:"created_at"`
	UpdatedAt   types.String             `tfsdk:"updated_at"`
}

func (d *substrateDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_kubernetes_substrate"
}

func (d *substrateDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.api = configureDataSource(req, resp)
}

func (d *substrateDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	a := computedAttributes(substrateAttrTypes)
	a["id"] = schema.StringAttribute{Required: true, Description: "The substrate's ID (ksb_...)."}
	a["tenant_id"] = tenantAttribute
	resp.Schema = schema.Schema{Description: "A pool's substrate: the cluster and node pools behind a pool (kubernetesSubstrates.get).", Attributes: a}
}

func (d *substrateDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m substrateModel
	tenant, ok := readTenant(ctx, req.Config, &resp.Diagnostics, d.api, &m, &m.TenantID)
	if !ok {
		return
	}
	s, err := d.api.GetSubstrate(ctx, tenant, m.ID.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("Cannot read the substrate", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, substrateFrom(s))...)
}

func substrateFrom(s *client.Substrate) substrateModel {
	m := substrateModel{
		ID:          types.StringValue(s.ID),
		TenantID:    types.StringValue(s.TenantID),
		PoolID:      types.StringValue(s.PoolID),
		PoolVersion: types.Int64Value(s.PoolVersion),
		AccountID:   types.StringValue(s.AccountID),
		Mode:        types.StringValue(s.Mode),
		ClusterID:   types.StringValue(s.ClusterID),
		NodePools:   make([]substrateNodePoolModel, len(s.NodePools)),
		JoinedNodes: types.Int64Value(s.JoinedNodes),
		State:       types.StringValue(string(s.State)),
		Message:     types.StringValue(s.Message),
		CreatedAt:   timeString(s.CreatedAt),
		UpdatedAt:   timeString(s.UpdatedAt),
	}
	for i, p := range s.NodePools {
		m.NodePools[i] = substrateNodePoolModel{Flavor: types.StringValue(p.Flavor), Name: types.StringValue(p.Name),
			NodePoolID: types.StringValue(p.NodePoolID), State: types.StringValue(string(p.State))}
	}
	return m
}
