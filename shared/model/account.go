package model

// Account is a provider account: whose it is, which provider, which cloud
// project, the zones of each region enabled on it, and how the reconciler
// acts in it. Stored at accounts/{accountId}.
type Account struct {
	ID string `firestore:"id" json:"id"`
	// TenantID is the tenant whose own account it is (the second hosting
	// model: a project of the tenant's); empty for the platform's, which
	// it offers to every tenant through pools. A pool uses a platform
	// account or its own tenant's, never another tenant's (lifecycle.UsableBy).
	TenantID string              `firestore:"tenantId,omitempty" json:"tenantId,omitempty"`
	Provider string              `firestore:"provider" json:"provider"`
	Project  string              `firestore:"project" json:"project"`
	Regions  map[string][]string `firestore:"regions" json:"regions"`
	// Impersonate is empty for a platform account, where the reconciler
	// acts as itself. A tenant's account (a project of the tenant's own)
	// names a service account of that project, which the tenant granted
	// the reconciler roles/iam.serviceAccountTokenCreator on: the
	// reconciler acts there only as that account, with short-lived
	// tokens.
	Impersonate string `firestore:"impersonate,omitempty" json:"impersonate,omitempty"`
	// NodeServiceAccount, when set, is the service account the nodes of
	// the account's clusters run as (a tenant's account names one of its
	// own project). Empty: the reconciler's configured one on a platform
	// account, GKE's default (the project's Compute Engine account) on a
	// tenant's.
	NodeServiceAccount string `firestore:"nodeServiceAccount,omitempty" json:"nodeServiceAccount,omitempty"`
}

// ManagedKubernetes reports whether the account's provider provides managed
// Kubernetes; only gcp does.
func (a Account) ManagedKubernetes() bool { return a.Provider == "gcp" }
