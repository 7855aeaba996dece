// Package iamcredentials is an in-process emulator of the IAM Service
// Account Credentials API (google.iam.credentials.v1.IAMCredentials) for
// tests and the devstack, spoken to over gRPC by the official client
// cloud.google.com/go/iam/credentials/apiv1 unchanged:
//
//	srv, err := iamcredentials.NewServer()
//	...
//	defer srv.Close()
//	caller := srv.IssueToken("reconciler@bc-dev.iam.gserviceaccount.com", time.Hour)
//	client, err := credentials.NewIamCredentialsClient(ctx, srv.ClientOptions(caller)...)
//
// It serves GenerateAccessToken; GenerateIdToken, SignBlob and SignJwt
// answer UNIMPLEMENTED.
//
// Who may impersonate whom is a set of grants of
// roles/iam.serviceAccountTokenCreator: Server.Grant gives a principal
// (an email) the role on a service account, Server.Revoke takes it back,
// both at any time. The caller of GenerateAccessToken is the principal of
// the OAuth access token in its "authorization: Bearer" header: a token
// the emulator issued, either with Server.IssueToken (a principal's own
// token, as Google's token service gives it to a workload through its
// default credentials) or by GenerateAccessToken. A call
//
//   - without a bearer token is UNAUTHENTICATED ("Request is missing
//     required authentication credential. ..."), and with a token the
//     emulator did not issue, or one past its expiry, UNAUTHENTICATED
//     ("Request had invalid authentication credentials. ...");
//   - whose name is not projects/-/serviceAccounts/{email}, without a
//     scope, or with a lifetime outside 1 s to 3600 s is
//     INVALID_ARGUMENT;
//   - whose caller lacks the role on the service account (or on the first
//     delegate, or a delegate on the next one or on the service account)
//     is PERMISSION_DENIED "Permission 'iam.serviceAccounts.getAccessToken'
//     denied on resource (or it may not exist).", as the real API answers
//     both for a missing grant and for a service account that does not
//     exist;
//   - otherwise returns a new opaque token ("ya29.emu." and random
//     characters) for the service account, expiring after the lifetime
//     asked (3600 s when none).
//
// Server.Identify tells which principal a live token stands for, so that
// another emulator can authorize calls made with it (the GKE simulator's
// WithIAM). Time is injected with WithClock.
//
// Faults. Server embeds a faults.Injector, so calls are failed, delayed
// and counted as in every emulator of this repository (package faults says
// how): FailNext fails the next n calls of an RPC with the code and
// message given, SetLatency delays its calls, AddReactor installs any
// Reactor, and Calls counts the calls. They come first: a call they answer
// is not authenticated, and mints nothing.
//
// Differences from the real service:
//   - Service accounts are not resources here: any well-formed email may
//     be granted on and impersonated, and unique IDs in place of the email
//     are refused with INVALID_ARGUMENT. No project, organization policy
//     or deny policy exists; the role is the only thing checked, and
//     project-level grants of it are not modelled (a grant names one
//     service account).
//   - Tokens are opaque strings known only to this process: they are not
//     JWTs, carry no scopes that anything checks, and are forgotten when
//     the server stops. The lifetime cannot be extended past an hour
//     (iam.allowServiceAccountCredentialLifetimeExtension is not
//     modelled). Revoking a grant does not revoke tokens already minted,
//     as in the real service.
//   - No ErrorInfo details are attached to errors, and the messages of
//     INVALID_ARGUMENT are this emulator's own.
package iamcredentials
