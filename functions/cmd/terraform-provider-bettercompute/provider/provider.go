// Package provider is the OpenTofu provider of the Better Compute
// Kubernetes API (API.md), on the framework terraform-plugin-framework and
// the API's Go client (shared/client): resources bettercompute_kubernetes_cluster
// and bettercompute_kubernetes_node_pool, data sources of a cluster, its
// node pools and a substrate.
//
// Every create waits for ready and every delete for deleted, with
// configurable timeouts; a resource in state error fails the apply with its
// message. Plan-time validation runs the API's own decoders (shared/input)
// on the configuration, so the provider holds no copy of the constraints.
// Creates carry an idempotency key made from the planned request (key.go),
// so a retried apply never makes a second resource.
package provider

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/better-compute/kubernetes/shared/client"
)

// New returns the provider's constructor, as providerserver takes it.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &bcProvider{version: version, lookup: os.LookupEnv} }
}

type bcProvider struct {
	version string
	// lookup reads the environment (tests give their own).
	lookup func(string) (string, bool)
}

// providerModel is the provider block.
type providerModel struct {
	Endpoint   types.String `tfsdk:"endpoint"`
	Tenant     types.String `tfsdk:"tenant"`
	Token      types.String `tfsdk:"token"`
	ConfigFile types.String `tfsdk:"config_file"`
}

// apiClient is what the resources and data sources get from Configure.
type apiClient struct {
	*client.Client
	// tenant is the provider's tenant: a resource's tenant_id unless it
	// names its own.
	tenant string
}

func (p *bcProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "bettercompute"
	resp.Version = p.version
}

func (p *bcProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The Better Compute Kubernetes API: managed clusters and their node pools.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "URL of the API (http://127.0.0.1:8080 for the devstack). Else BC_URL, else the url of bc's config file.",
			},
			"tenant": schema.StringAttribute{
				Optional:    true,
				Description: "Tenant of the resources that name none. Else BC_TENANT, else the tenant of bc's config file.",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Bearer token. Else BC_TOKEN, else the token of bc's config file (bc login).",
			},
			"config_file": schema.StringAttribute{
				Optional:    true,
				Description: "bc's config file. Else BC_CONFIG, else bc/config.yaml in the user's config directory.",
			},
		},
	}
}

// settings is the provider's configuration resolved: the block, else the
// environment, else the config file, as bc resolves its flags.
type settings struct{ endpoint, tenant, token string }

func (p *bcProvider) resolve(m providerModel) (settings, error) {
	path := m.ConfigFile.ValueString()
	if path == "" {
		var err error
		if path, err = client.ConfigPath(p.lookup); err != nil {
			return settings{}, err
		}
	}
	cfg, err := client.LoadConfig(path)
	if err != nil {
		return settings{}, err
	}
	pick := func(v types.String, env, fromFile string) string {
		if s := v.ValueString(); s != "" {
			return s
		}
		if s, ok := p.lookup(env); ok && s != "" {
			return s
		}
		return fromFile
	}
	return settings{
		endpoint: pick(m.Endpoint, "BC_URL", cfg.URL),
		tenant:   pick(m.Tenant, "BC_TENANT", cfg.Tenant),
		token:    pick(m.Token, "BC_TOKEN", cfg.Token),
	}, nil
}

func (p *bcProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.Endpoint.IsUnknown() || m.Tenant.IsUnknown() || m.Token.IsUnknown() || m.ConfigFile.IsUnknown() {
		// Known at apply: Configure is called again then.
		return
	}
	s, err := p.resolve(m)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("config_file"), "Cannot read bc's config file", err.Error())
		return
	}
	if s.endpoint == "" {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "No API endpoint",
			"Set endpoint in the provider block, or BC_URL, or run bc login.")
		return
	}
	c, err := client.New(s.endpoint, client.WithToken(s.token), client.WithUserAgent("terraform-provider-bettercompute/"+p.version))
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("endpoint"), "Invalid API endpoint", err.Error())
		return
	}
	ac := &apiClient{Client: c, tenant: s.tenant}
	resp.ResourceData = ac
	resp.DataSourceData = ac
}

func (p *bcProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return &clusterResource{} },
		func() resource.Resource { return &nodePoolResource{} },
	}
}

func (p *bcProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		func() datasource.DataSource { return &clusterDataSource{} },
		func() datasource.DataSource { return &nodePoolsDataSource{} },
		func() datasource.DataSource { return &substrateDataSource{} },
	}
}

// clientFrom is the client Configure gave, or nil before Configure (the
// framework calls a resource's Configure with no data then).
func clientFrom(data any) (*apiClient, error) {
	if data == nil {
		return nil, nil
	}
	c, ok := data.(*apiClient)
	if !ok {
		return nil, fmt.Errorf("unexpected provider data %T", data)
	}
	return c, nil
}

// tenantOf is the resource's tenant: its own, else the provider's.
func (c *apiClient) tenantOf(v types.String) (string, error) {
	if s := v.ValueString(); s != "" {
		return s, nil
	}
	if c.tenant == "" {
		return "", fmt.Errorf("no tenant: set tenant_id, or tenant in the provider block, or BC_TENANT, or run bc login")
	}
	return c.tenant, nil
}

// importTenant is the tenant of an imported resource: the import ID's, or
// else the provider's (none when the provider is not configured yet).
func (c *apiClient) importTenant(ref importRef) string {
	if ref.tenant == "" && c != nil {
		return c.tenant
	}
	return ref.tenant
}

// planTenant shows the provider's tenant in the plan of a resource that
// names none, rather than "known after apply": the create sends it.
func planTenant(ctx context.Context, api *apiClient, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if api == nil || api.tenant == "" || req.Plan.Raw.IsNull() {
		return
	}
	var tenant types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("tenant_id"), &tenant)...)
	if tenant.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("tenant_id"), api.tenant)...)
	}
}
