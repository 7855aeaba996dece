package lifecycle

import (
	"fmt"

	"github.com/better-compute/kubernetes/shared/model"
)

// UsableBy reports whether a pool of the tenant may use the account: a
// platform account, or the tenant's own.
func UsableBy(a model.Account, tenantID string) bool {
	return a.TenantID == "" || a.TenantID == tenantID
}

// Unusable is the refusal of an account that a tenant may not use, in the
// same words for an account that does not exist, so that nothing is
// revealed of other tenants' accounts.
func Unusable(accountID, tenantID string) string {
	return fmt.Sprintf("account %s cannot be used by tenant %s", accountID, tenantID)
}
