package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/better-compute/kubernetes/shared/client"
)

// The object types of the nested attributes.
var (
	autoscalingType  = types.ObjectType{AttrTypes: map[string]attr.Type{"min_nodes": types.Int64Type, "max_nodes": types.Int64Type}}
	acceleratorsType = types.ObjectType{AttrTypes: map[string]attr.Type{"type": types.StringType, "count": types.Int64Type}}
	taintType        = types.ObjectType{AttrTypes: map[string]attr.Type{"key": types.StringType, "value": types.StringType, "effect": types.StringType}}
)

type autoscalingModel struct {
	MinNodes types.Int64 `tfsdk:"min_nodes"`
	MaxNodes types.Int64 `tfsdk:"max_nodes"`
}

type acceleratorsModel struct {
	Type  types.String `tfsdk:"type"`
	Count types.Int64  `tfsdk:"count"`
}

type taintModel struct {
	Key    types.String `tfsdk:"key"`
	Value  types.String `tfsdk:"value"`
	Effect types.String `tfsdk:"effect"`
}

// specModel is a node pool as a tenant asks for it: the node pool create
// body without tenantId, clusterId and idempotencyKey, as a cluster's
// node_pool block and the node pool resource both hold it.
type specModel struct {
	Name         types.String `tfsdk:"name"`
	MachineType  types.String `tfsdk:"machine_type"`
	NodeCount    types.Int64  `tfsdk:"node_count"`
	Autoscaling  types.Object `tfsdk:"autoscaling"`
	DiskGiB      types.Int64  `tfsdk:"disk_gib"`
	DiskType     types.String `tfsdk:"disk_type"`
	Spot         types.Bool   `tfsdk:"spot"`
	Accelerators types.Object `tfsdk:"accelerators"`
	Zones        types.List   `tfsdk:"zones"`
	Labels       types.Map    `tfsdk:"labels"`
	Taints       types.List   `tfsdk:"taints"`
}

// nodePoolAttrs is every attribute of a node pool as the API answers it:
// the resource's without its timeouts, and one element of the node pools
// data source.
type nodePoolAttrs struct {
	ID        types.String `tfsdk:"id"`
	TenantID  types.String `tfsdk:"tenant_id"`
	ClusterID types.String `tfsdk:"cluster_id"`
	specModel
	CurrentNodeCount types.Int64  `tfsdk:"current_node_count"`
	ManagedBy        types.String `tfsdk:"managed_by"`
	State            types.String `tfsdk:"state"`
	Message          types.String `tfsdk:"message"`
	Version          types.Int64  `tfsdk:"version"`
	CreatedAt        types.String `tfsdk:"created_at"`
	UpdatedAt        types.String `tfsdk:"updated_at"`
}

// clusterAttrs is every attribute of a cluster as the API answers it.
type clusterAttrs struct {
	ID                types.String `tfsdk:"id"`
	TenantID          types.String `tfsdk:"tenant_id"`
	PoolID            types.String `tfsdk:"pool_id"`
	AccountID         types.String `tfsdk:"account_id"`
	Name              types.String `tfsdk:"name"`
	Mode              types.String `tfsdk:"mode"`
	Region            types.String `tfsdk:"region"`
	ReleaseChannel    types.String `tfsdk:"release_channel"`
	KubernetesVersion types.String `tfsdk:"kubernetes_version"`
	Endpoint          types.String `tfsdk:"endpoint"`
	ProviderName      types.String `tfsdk:"provider_name"`
	Labels            types.Map    `tfsdk:"labels"`
	ManagedBy         types.String `tfsdk:"managed_by"`
	State             types.String `tfsdk:"state"`
	Message           types.String `tfsdk:"message"`
	Version           types.Int64  `tfsdk:"version"`
	CreatedAt         types.String `tfsdk:"created_at"`
	UpdatedAt         types.String `tfsdk:"updated_at"`
}

// specTypes are the attribute types of specModel, for a list of them.
var specTypes = map[string]attr.Type{
	"name": types.StringType, "machine_type": types.StringType, "node_count": types.Int64Type,
	"autoscaling": autoscalingType, "disk_gib": types.Int64Type, "disk_type": types.StringType,
	"spot": types.BoolType, "accelerators": acceleratorsType, "zones": types.ListType{ElemType: types.StringType},
	"labels": types.MapType{ElemType: types.StringType}, "taints": types.ListType{ElemType: taintType},
}

// nodePoolAttrTypes are the attribute types of nodePoolAttrs.
func nodePoolAttrTypes() map[string]attr.Type {
	m := map[string]attr.Type{
		"id": types.StringType, "tenant_id": types.StringType, "cluster_id": types.StringType,
		"current_node_count": types.Int64Type, "managed_by": types.StringType, "state": types.StringType,
		"message": types.StringType, "version": types.Int64Type, "created_at": types.StringType, "updated_at": types.StringType,
	}
	for k, v := range specTypes {
		m[k] = v
	}
	return m
}

// timeString is a time as the state keeps it: RFC 3339, or null when zero.
func timeString(t time.Time) types.String {
	if t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(t.UTC().Format(time.RFC3339Nano))
}

// optString is null for "" (a field the API omits when not given).
func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

func labelsValue(m map[string]string) types.Map {
	elems := map[string]attr.Value{}
	for k, v := range m {
		elems[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, elems)
}

func stringsValue(s []string) types.List {
	elems := make([]attr.Value, len(s))
	for i, v := range s {
		elems[i] = types.StringValue(v)
	}
	return types.ListValueMust(types.StringType, elems)
}

// specFrom is the spec of a pool the API answered.
func specFrom(p *client.NodePool) specModel {
	s := specModel{
		Name:         types.StringValue(p.Name),
		MachineType:  types.StringValue(p.MachineType),
		NodeCount:    types.Int64Value(int64(p.NodeCount)),
		Autoscaling:  types.ObjectNull(autoscalingType.AttrTypes),
		DiskGiB:      types.Int64Null(),
		DiskType:     optString(p.DiskType),
		Spot:         types.BoolValue(p.Spot),
		Accelerators: types.ObjectNull(acceleratorsType.AttrTypes),
		Zones:        stringsValue(p.Zones),
		Labels:       labelsValue(p.Labels),
	}
	if a := p.Autoscaling; a != nil {
		s.Autoscaling = types.ObjectValueMust(autoscalingType.AttrTypes, map[string]attr.Value{
			"min_nodes": types.Int64Value(int64(a.MinNodes)), "max_nodes": types.Int64Value(int64(a.MaxNodes))})
	}
	if p.DiskGiB != 0 {
		s.DiskGiB = types.Int64Value(int64(p.DiskGiB))
	}
	if a := p.Accelerators; a != nil {
		s.Accelerators = types.ObjectValueMust(acceleratorsType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue(a.Type), "count": types.Int64Value(int64(a.Count))})
	}
	taints := make([]attr.Value, len(p.Taints))
	for i, t := range p.Taints {
		taints[i] = types.ObjectValueMust(taintType.AttrTypes, map[string]attr.Value{
			"key": types.StringValue(t.Key), "value": types.StringValue(t.Value), "effect": types.StringValue(t.Effect)})
	}
	s.Taints = types.ListValueMust(taintType, taints)
	return s
}

// nodePoolFrom is every attribute of a pool the API answered.
func nodePoolFrom(p *client.NodePool) nodePoolAttrs {
	a := nodePoolAttrs{
		ID:               types.StringValue(p.ID),
		TenantID:         types.StringValue(p.TenantID),
		ClusterID:        types.StringValue(p.ClusterID),
		specModel:        specFrom(p),
		CurrentNodeCount: types.Int64Null(),
		ManagedBy:        optString(p.ManagedBy),
		State:            types.StringValue(string(p.State)),
		Message:          types.StringValue(p.Message),
		Version:          types.Int64Value(p.Version),
		CreatedAt:        timeString(p.CreatedAt),
		UpdatedAt:        timeString(p.UpdatedAt),
	}
	if p.CurrentNodeCount != nil {
		a.CurrentNodeCount = types.Int64Value(int64(*p.CurrentNodeCount))
	}
	return a
}

// clusterFrom is every attribute of a cluster the API answered.
func clusterFrom(c *client.Cluster) clusterAttrs {
	return clusterAttrs{
		ID:                types.StringValue(c.ID),
		TenantID:          types.StringValue(c.TenantID),
		PoolID:            types.StringValue(c.PoolID),
		AccountID:         types.StringValue(c.AccountID),
		Name:              types.StringValue(c.Name),
		Mode:              types.StringValue(c.Mode),
		Region:            types.StringValue(c.Region),
		ReleaseChannel:    types.StringValue(c.ReleaseChannel),
		KubernetesVersion: types.StringValue(c.KubernetesVersion),
		Endpoint:          types.StringValue(c.Endpoint),
		ProviderName:      types.StringValue(c.ProviderName),
		Labels:            labelsValue(c.Labels),
		ManagedBy:         optString(c.ManagedBy),
		State:             types.StringValue(string(c.State)),
		Message:           types.StringValue(c.Message),
		Version:           types.Int64Value(c.Version),
		CreatedAt:         timeString(c.CreatedAt),
		UpdatedAt:         timeString(c.UpdatedAt),
	}
}

// toSpec is the client's spec of a model whose values are all known (a
// plan at apply).
func (s specModel) toSpec(ctx context.Context) (client.NodePoolSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := client.NodePoolSpec{
		Name:        s.Name.ValueString(),
		MachineType: s.MachineType.ValueString(),
		NodeCount:   int(s.NodeCount.ValueInt64()),
		DiskGiB:     int(s.DiskGiB.ValueInt64()),
		DiskType:    s.DiskType.ValueString(),
		Spot:        s.Spot.ValueBool(),
	}
	if !s.Autoscaling.IsNull() && !s.Autoscaling.IsUnknown() {
		var a autoscalingModel
		diags.Append(s.Autoscaling.As(ctx, &a, basetypes.ObjectAsOptions{})...)
		out.Autoscaling = &client.Autoscaling{MinNodes: int(a.MinNodes.ValueInt64()), MaxNodes: int(a.MaxNodes.ValueInt64())}
	}
	if !s.Accelerators.IsNull() && !s.Accelerators.IsUnknown() {
		var a acceleratorsModel
		diags.Append(s.Accelerators.As(ctx, &a, basetypes.ObjectAsOptions{})...)
		out.Accelerators = &client.Accelerators{Type: a.Type.ValueString(), Count: int(a.Count.ValueInt64())}
	}
	if !s.Zones.IsNull() && !s.Zones.IsUnknown() {
		diags.Append(s.Zones.ElementsAs(ctx, &out.Zones, false)...)
	}
	if !s.Labels.IsNull() && !s.Labels.IsUnknown() {
		diags.Append(s.Labels.ElementsAs(ctx, &out.Labels, false)...)
	}
	if !s.Taints.IsNull() && !s.Taints.IsUnknown() {
		var ts []taintModel
		diags.Append(s.Taints.ElementsAs(ctx, &ts, false)...)
		for _, t := range ts {
			out.Taints = append(out.Taints, client.Taint{Key: t.Key.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()})
		}
	}
	return out, diags
}
