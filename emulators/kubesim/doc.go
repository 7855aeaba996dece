// Package kubesim runs real Kubernetes API servers for tests and the
// devstack: kube-apiserver built from the Kubernetes source at the version
// pinned by emulators/kubeapiserver (a module of its own, so that
// k8s.io/kubernetes stays out of this one), with its etcd embedded, in one
// process per server.
//
// Binary builds the server once per version of its sources and of Go,
// into the user's cache directory; the first build takes several minutes,
// later calls return at once. Inside the repository it builds
// emulators/kubeapiserver; outside it (a devstack installed with go
// install), the copy of that module's files embedded in this package. Builder does the same in the background and
// reports its progress. StartAPIServer runs one server:
//
//	bin, err := kubesim.Binary(ctx, log)
//	...
//	api, err := kubesim.StartAPIServer(ctx, bin, kubesim.Options{Dir: dir})
//	...
//	defer api.Stop()
//	clientset, err := kubernetes.NewForConfig(api.RESTConfig(""))
//
// In a test, ForTest does all of it and stops the server at cleanup.
//
// The server is the real one: server-side apply, field ownership and
// conflicts, validation, admission, RBAC and watches behave as in any
// cluster. What differs from a cluster is what else runs, which is
// nothing: no controller manager (no Pods for a DaemonSet, no garbage
// collection, no namespace finalization), no scheduler, no kubelet, no
// Nodes. Clients authenticate with static bearer tokens (the admin token
// and Options.Tokens) and, with Options.Webhook, any token a service of
// the caller's vouches for (TokenReview), which may also allow what RBAC
// does not (SubjectAccessReview), as a managed cluster's provider does;
// TLS is served with a certificate for 127.0.0.1 and localhost signed by
// the server's own CA.
package kubesim
