package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	gkeemu "github.com/better-compute/kubernetes/emulators/gke"
	iamemu "github.com/better-compute/kubernetes/emulators/iamcredentials"
	"github.com/better-compute/kubernetes/functions/cloudrun"
	"github.com/better-compute/kubernetes/shared/httpapi"
)

// The devstack's IAM plays both hosting models of the seed's accounts: the
// reconciler acts as itself (ReconcilerServiceAccount) in the projects of
// platform accounts, and only as a tenant's service account in the
// project of an account that names one to impersonate. The IAM
// Credentials emulator holds who may impersonate whom, and the GKE
// simulator, with its IAM on, who may call into which project:
//
//   - a platform account's project allows the reconciler;
//   - a tenant's account's project allows the service account it names
//     (what infra/tenant grants it there), and the reconciler holds
//     roles/iam.serviceAccountTokenCreator on that account (what
//     infra/tenant grants the platform), so that it works only through
//     impersonation.
//
// The same policy decides who may use the Kubernetes APIs of a project's
// simulated clusters (the GKE simulator authenticates their callers'
// access tokens, as GKE does): the reconciler's own token there, the
// tenant's provisioner's in acme-prod.
//
// Tests revoke and grant again on Stack.IAM, or change a project's policy
// on Stack.GKE (SetProjectIAM). Neither is saved in the data file: a
// restart starts from the seed again.

// ReconcilerServiceAccount is the reconciler's own identity in the
// devstack: reconciler@<project>.iam.gserviceaccount.com.
func (c Config) ReconcilerServiceAccount() string {
	return "reconciler@" + c.Project + ".iam.gserviceaccount.com"
}

// The identities of the internal functions' callers, as infra/ makes
// them in production, each the one caller its function accepts: Cloud
// Tasks calls the reconcile function with OIDC tokens of
// TasksServiceAccount (the Cloud Tasks emulator's dispatches),
// Cloud Scheduler the watchdog with SchedulerServiceAccount's (the
// stack's watchdog loop), the push subscriptions the pool events
// function with PushServiceAccount's (the stack's pool delivery). The
// development issuer signs their tokens as Google does
// (devissuer.ServiceAccountToken); a tenant's token from /dev/token is
// none of them.

// TasksServiceAccount is the identity of the reconcile tasks' OIDC
// tokens: tasks@<project>.iam.gserviceaccount.com.
func (c Config) TasksServiceAccount() string {
	return "tasks@" + c.Project + ".iam.gserviceaccount.com"
}

// SchedulerServiceAccount is the identity of the watchdog's schedule's
// OIDC tokens: scheduler@<project>.iam.gserviceaccount.com.
func (c Config) SchedulerServiceAccount() string {
	return "scheduler@" + c.Project + ".iam.gserviceaccount.com"
}

// PushServiceAccount is the identity of the pool events' push
// subscriptions' OIDC tokens: pool-events-push@<project>.iam.gserviceaccount.com.
func (c Config) PushServiceAccount() string {
	return "pool-events-push@" + c.Project + ".iam.gserviceaccount.com"
}

// callerTokenLifetime is the lifetime of the internal callers' tokens,
// as Google's (an hour at most); each call has one of its own.
const callerTokenLifetime = 10 * time.Minute

// platformTokenLifetime is the lifetime of the reconciler's own token: it
// outlives any devstack process, which mints a new one when it starts.
const platformTokenLifetime = 10 * 365 * 24 * time.Hour

// startIAM starts the IAM Credentials emulator, grants the reconciler the
// impersonation of every tenant account's service account of the seed,
// and mints the reconciler's own token.
func (s *Stack) startIAM() error {
	srv, err := iamemu.NewServer(iamemu.WithLogger(s.log))
	if err != nil {
		return fmt.Errorf("iam credentials emulator: %w", err)
	}
	s.IAM = srv
	s.emulators = append(s.emulators, srv.Close)
	me := s.cfg.ReconcilerServiceAccount()
	if s.cfg.Seed != nil {
		for _, a := range s.cfg.Seed.Accounts {
			if a.Impersonate != "" {
				srv.Grant(a.Impersonate, me)
			}
		}
	}
	s.platformToken = srv.IssueToken(me, platformTokenLifetime)
	return nil
}

// iamPolicy is the GKE simulator's per-project policy from the seed.
func (s *Stack) iamPolicy() map[string][]string {
	projects := map[string][]string{}
	if s.cfg.Seed == nil {
		return projects
	}
	for _, a := range s.cfg.Seed.Accounts {
		if !a.ManagedKubernetes() {
			continue
		}
		who := s.cfg.ReconcilerServiceAccount()
		if a.Impersonate != "" {
			who = a.Impersonate
		}
		projects[a.Project] = append(projects[a.Project], who)
	}
	return projects
}

// iamOptions turn the GKE simulator's IAM on, its tokens the IAM
// Credentials emulator's.
func (s *Stack) iamOptions() []gkeemu.Option {
	return []gkeemu.Option{gkeemu.WithIAM(gkeemu.IAM{Projects: s.iamPolicy(), Identify: s.IAM.Identify})}
}

// iamConfig points the reconciler's impersonation at the IAM
// Credentials emulator and gives it its own identity's token.
func (s *Stack) iamConfig(c *cloudrun.Config) {
	c.IAMCredentialsEmulatorHost = s.IAM.Addr()
	c.EmulatorAccessToken = s.platformToken
	c.ReconcilerServiceAccount = s.cfg.ReconcilerServiceAccount()
	if s.cfg.ImpersonationTokenLifetime > 0 {
		c.ImpersonationTokenLifetime = s.cfg.ImpersonationTokenLifetime
	}
}

// AccessTokenPath is where the devstack mints access tokens of its
// emulators (API.md §8's /dev/token is the tenants' JWTs).
const AccessTokenPath = "/dev/access-token"

// accessToken answers POST /dev/access-token {"principal"?: email}: an
// access token of principal (the reconciler when none), for a client that
// calls the GKE simulator or the IAM Credentials emulator directly,
// {"accessToken", "expiresIn"} valid an hour. Development only: anyone
// may be anyone here.
func (s *Stack) accessToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Principal string `json:"principal"`
	}
	body, ok := httpapi.ReadBody(r.Context(), w, r)
	if !ok {
		return
	}
	// No body asks for the reconciler's token, as {} does.
	if len(bytes.TrimSpace(body)) > 0 {
		if err := httpapi.DecodeJSON(body, &req); err != nil {
			httpapi.WriteError(r.Context(), w, err)
			return
		}
	}
	if req.Principal == "" {
		req.Principal = s.cfg.ReconcilerServiceAccount()
	}
	const life = time.Hour
	tok := s.IAM.IssueToken(req.Principal, life)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"accessToken": tok, "expiresIn": int(life.Seconds())})
}

// iamSummary lists, for the start-up banner, who may act in each
// simulated project.
func (s *Stack) iamSummary() string {
	policy := s.iamPolicy()
	projects := make([]string, 0, len(policy))
	for p := range policy {
		projects = append(projects, p)
	}
	sort.Strings(projects)
	out := ""
	for _, p := range projects {
		out += fmt.Sprintf("\n    %-14s %v", p, policy[p])
	}
	return out
}
