package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/better-compute/kubernetes/shared/errs"
)

// Identifier verifies an Authorization header value and returns the
// identity its token names (Verifier.Identify).
type Identifier interface {
	Identify(ctx context.Context, authorization string) (Identity, error)
}

// ServiceAccount admits the OIDC tokens of one service account only: a
// token its Identifier accepts (signature, issuer, audience, validity)
// whose verified email is Account. It authenticates the internal
// functions, each of which has one legitimate caller, a Google service
// minting tokens as the account it is configured with: Cloud Tasks for
// the reconcile function, Cloud Scheduler for the watchdog, a Pub/Sub
// push subscription for a CloudEvent function. Google's tokens name the
// account by their email claim (their subject is its numeric unique ID),
// and so do the development issuer's (devissuer.ServiceAccountToken); a
// tenant's token has no verified email of a service account.
type ServiceAccount struct {
	Identifier Identifier
	Account    string
}

// NewServiceAccount returns the authenticator of account's tokens, as id
// verifies them.
func NewServiceAccount(id Identifier, account string) (ServiceAccount, error) {
	if id == nil {
		return ServiceAccount{}, errors.New("auth: a service account's authenticator needs a verifier")
	}
	if !strings.Contains(account, "@") {
		return ServiceAccount{}, fmt.Errorf("auth: %q is not a service account email", account)
	}
	return ServiceAccount{Identifier: id, Account: account}, nil
}

// Verify returns the account when the token is one of its tokens. A
// missing, malformed, badly signed or expired token, or one of another
// issuer or audience, is errs.Unauthenticated (401); a valid token of
// anyone else is errs.PermissionDenied (403), the account it names kept
// in the cause, for the logs, not in the message.
func (s ServiceAccount) Verify(ctx context.Context, authorization string) (string, error) {
	id, err := s.Identifier.Identify(ctx, authorization)
	if err != nil {
		return "", err
	}
	if id.Email == "" || Authorize(Service(id.Email), Grant{Invoker: s.Account}, PermInvoke, Resource{}) != nil {
		who := "subject " + id.Subject
		if id.Email != "" {
			who = id.Email
		}
		return "", errs.Wrap(errs.PermissionDenied, fmt.Errorf("token of %s, want %s", who, s.Account),
			"the caller may not call this function")
	}
	return id.Email, nil
}
