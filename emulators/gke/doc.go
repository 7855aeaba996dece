// Package gke is an in-process emulator of the GKE API
// (google.container.v1.ClusterManager) for tests, spoken to over gRPC by
// the official client cloud.google.com/go/container/apiv1 unchanged:
//
//	srv, err := gke.NewServer(gke.WithOperationTime(5 * time.Millisecond))
//	...
//	defer srv.Close()
//	client, err := container.NewClusterManagerClient(ctx,
//		option.WithEndpoint(srv.Addr()),
//		option.WithoutAuthentication(),
//		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
//
// It serves the RPCs someone calls ("RPCs not served" below names the
// others, which answer UNIMPLEMENTED). Requests may
// use the name/parent form (projects/P/locations/L/clusters/C
// [/nodePools/NP]) or the deprecated project_id/zone/cluster_id/
// node_pool_id fields.
//
// Evidence. The simulator answers as real GKE did in traffic recorded
// against it: Config Connector's golden HTTP logs, each taken from the
// commit that recorded it against real GCP, which replay_test.go replays
// with the official client (testdata/replay names each source's
// repository, commit and path), and GKE's error texts as public issue
// threads quote them. What still differs is listed at the end.
//
// As in GKE, every mutation returns a long-running Operation. A cluster
// operation is RUNNING at once; a node pool operation (including
// UpdateCluster's and SetNodePoolAutoscaling's UPDATE_CLUSTER on a pool)
// is PENDING in the answer to its call, and for the first tenth of its
// time, then RUNNING. Each is DONE when the operation time
// (WithOperationTime, DefaultOperationTime otherwise) has passed on the
// injected clock (WithClock), with an endTime and, on failure, an error and
// statusMessage. Completion is evaluated on every call from the clock
// rather than by timers, so a fake clock makes tests deterministic. An
// operation's selfLink and targetLink name the project by number
// (ProjectNumber) and a zonal location as zones/Z, regional ones as
// locations/R (https://container.googleapis.com/v1/projects/123456789012/
// zones/us-central1-a/operations/operation-...); its zone field is the
// location and its location field is empty, as GKE answers. A cluster's
// and a pool's selfLink keep the project ID, with zones/ for a zonal
// cluster. Meanwhile clusters are PROVISIONING (create), STOPPING (delete)
// or RECONCILING (any other operation on the cluster or one of its pools),
// and node pools PROVISIONING, RECONCILING or STOPPING. A cluster-level
// operation needs the cluster idle; a node pool operation needs no
// cluster-level operation and none on the same pool; otherwise
// FAILED_PRECONDITION, in GKE's words: "Operation operation-... is
// currently creating cluster C. Please wait and try again once it is
// done." (deleting cluster, upgrading cluster, creating a node pool for
// cluster, deleting a node pool for cluster); for another operation,
// "... is currently operating on cluster C. ..." to a cluster call and
// "Cluster is running incompatible operation operation-...." to a call
// on the pool it works on, and to a cluster deletion while any node pool
// operation runs (elastic/cloud-on-k8s#9098). A
// sixth concurrent operation on a cluster is RESOURCE_EXHAUSTED. A
// missing cluster is NOT_FOUND "Not found: projects/P/zones/Z/clusters/C."
// (locations/R for a regional one), a missing node pool NOT_FOUND "Not
// found: node pool "NP" not found.", an UpdateCluster that sets nothing
// INVALID_ARGUMENT "Must specify a field to update.".
//
// Read back, a pool shows GKE's defaults for what it was created without:
// machine type e2-medium, a 100 GB pd-balanced disk (hyperdisk-balanced
// for n4), image COS_CONTAINERD, service account "default", the six
// default OAuth scopes, metadata disable-legacy-endpoints=true, Shielded
// VM integrity monitoring, 110 Pods a node, upgradeSettings SURGE with
// maxSurge 1, management autoRepair and autoUpgrade, and autoscaling's
// locationPolicy BALANCED; a queued provisioning pool instead shows
// upgradeSettings SHORT_LIVED (no surge), locationPolicy ANY and the taint
// cloud.google.com/gke-queued=true:NoSchedule on its nodes. A cluster shows its first pool's nodeConfig as
// its own; one created in the legacy form (initialNodeCount and
// nodeConfig, which become the pool default-pool) keeps its
// initialNodeCount. Instance groups are named as GKE names them,
// gke-<cluster>-<pool>-<8 hex, one hash per zone>-grp, the cluster and
// pool names cut to 32 characters together (each keeps 16 when both are
// longer, a short one leaves the other the rest) so that the name fits
// Compute Engine's 63; the 8 hex are those of the zone's Node names.
//
// Refusals. What GKE checks when it accepts a request is refused
// synchronously with INVALID_ARGUMENT: names, unknown locations, node
// locations outside the cluster's region, unknown machine types,
// accelerators the machine family cannot take or counts its shape does not
// have, disk types the family does not support, bad autoscaling bounds
// (see below),
// versions newer than the master, and node labels whose keys GKE or
// Kubernetes manage (in a new pool, a new cluster's pools or
// UpdateNodePool), in GKE's words: `Node labels with key
// "cloud.google.com/compute-class" are managed by GKE or Kubernetes and
// must not be manually specified.` for a key under cloud.google.com/, and
// "Applying kubernetes label is not allowed: node-role.kubernetes.io/x."
// for one under kubernetes.io/ or k8s.io/ (terraform-provider-google
// #19677 and #6003 quote both, as HTTP 400). What GKE only finds out while it works
// makes the operation end with an error instead: a machine type the zone
// does not offer (g2 in us-central1-f and europe-west1-d; a2 in
// europe-west4-c, us-east1-d and us-west1-c) leaves the pool ERROR, a
// stockout (Server.Stockout) leaves it with part of its nodes until its
// instance groups get the others, and Server.FailNextOperation fails any
// operation. A cluster whose create failed is ERROR.
//
// Autoscaling bounds. A pool's autoscaling is bounded per zone
// (min_node_count, max_node_count) or as a whole, over all its zones
// (total_min_node_count, total_max_node_count, with location_policy ANY
// or BALANCED), never both, as the API says of the two kinds; either is
// read back as sent, with locationPolicy BALANCED when none is given. In
// GKE's words, maxima both zero are refused with "Node_pool_autoscaling.
// max_node_count and node_pool_autoscaling.total_max_node_count cannot be
// both set to zero." (terraform-google-modules/
// terraform-google-kubernetes-engine#1554, HTTP 400), maxima both set
// with "... cannot be both greater than zero." (quoted mid-sentence, of
// an update Config Connector sent, in a public repository's notes; the
// capital and full stop are the first message's), and minima both set
// with those words of min_node_count and total_min_node_count, which no
// trace quotes. A
// per-zone bound beside a total one of the other end, and bounds out of
// order, are refused in the simulator's words. Server.Autoscale and
// Server.AutoscaleZones (a count per zone, as ANY spreads a pool) keep
// each zone within per-zone bounds, or the pool's sum within total ones.
//
// Stockouts, in GKE's words. Public traces show GKE reporting a zone out
// of machines in these forms, and Server.StockoutAs chooses one per
// stockout (StockoutForm), so that a client is held to each:
//   - StockoutInstances (Server.Stockout): the operation's error
//     (RESOURCE_EXHAUSTED) and the pool's status message, RUNNING_WITH_ERROR,
//     in the instance group manager's words: "Google Compute Engine: Not
//     all instances running in IGM after 14.691006793s. Expected 1,
//     running 0, transitioning 1. Current errors: [GCE_STOCKOUT]: Instance
//     'gke-...' creation failed: The zone 'projects/P/zones/Z' does not
//     have enough resources available to fulfill the request.  '(resource
//     type:compute)'." (tranquilitybase-io/tb-gcp#589,
//     hashicorp/terraform-provider-google#10121 and #6287, which says the
//     pool is created in error and GKE keeps waiting for the machines,
//     akka/akka-core#32992; GoogleCloudPlatform/cluster-toolkit#6278
//     quotes one naming three zones).
//   - StockoutCapacity: the pool ERROR with the terse status message "Not
//     all instances running in IGM after 35m9s. Expected 18, running 16.
//     [GCE_STOCKOUT]: 2 nodes cannot be created due to lack of capacity.",
//     naming no zone (quoted from a pool's gcloud describe in a public
//     repository's notes, 2026), which the operation's error repeats.
//   - StockoutConditions: no status message (the API deprecates it for
//     conditions), the pool RUNNING_WITH_ERROR with a StatusCondition of
//     code GCE_STOCKOUT ("Google Compute Engine resources are temporarily
//     unavailable", the API reference's StatusCondition) and canonical code
//     RESOURCE_EXHAUSTED per zone short, in Compute Engine's words ("The
//     zone 'projects/P/zones/Z' does not have enough resources available
//     to fulfill the request."); the operation's error says those words
//     and its nodepoolConditions carry the conditions. This form is the
//     API's documented one, not a quoted message.
//
// Compute Engine. NewComputeServer serves the pools' instance groups (one
// per zone, those instanceGroupUrls name) over Compute Engine's REST API,
// as the official client cloud.google.com/go/compute/apiv1 calls it:
// instanceGroupManagers aggregatedList (with a name filter) and get, with
// targetSize and currentActions (a stockout's missing nodes creating), as
// Compute Engine answered them in the recordings, which replay_test.go
// replays (the gets of GKE's groups in every container recording against
// real GCP): selfLink and zone in the https://www.googleapis.com/compute/v1/
// form, instanceGroup and instanceTemplate (regions/R/instanceTemplates/
// the base instance name) in the compute/beta form GKE creates them
// through, one version, status stable once every instance runs,
// targetSizePolicy INDIVIDUAL, listManagedInstancesResults PAGINATED.
// aggregatedList answers every scope the project sees (each region and
// zone of the catalog), those without groups (or none the filter keeps)
// with Compute Engine's warning: code NO_RESULTS_ON_PAGE, data
// [{"key": "scope", "value": "zones/Z"}], message "There are no results
// for scope 'zones/Z' on this page." (cloud-custodian/cloud-custodian
// #4491; an aggregated list recorded by Config Connector words it "No
// results for the scope 'zones/Z'.", commit
// 29e3526e700de6b3e4f74cad1293cc3e95775521,
// mockgcp/mockcompute/testdata/computenetworks/subnetmode-auto/_http.log). Both methods answer partial responses (the fields parameter or
// the X-Goog-FieldMask header; fields.go says which syntax), and refuse a
// selection naming a member the answer's message lacks as Compute Engine
// does: 400 invalidParameter "Invalid field selection NAME"
// (openshift/installer#7096). Not recorded, so ours: the words for a
// selection that does not parse; whether an aggregated list's scope left
// empty by a selection is answered as {} (ours) or left out.
//
// Faults. Server embeds a faults.Injector, so calls are failed, delayed
// and counted as in every emulator of this repository (package faults says
// how): FailNext fails the next n calls of an RPC with the code and
// message given, SetLatency delays its calls, AddReactor installs any
// Reactor, and Calls counts the calls. They come first: a call they answer
// is neither authenticated nor charged to a quota, and changes nothing.
// ComputeServer embeds a faults.Injector too, for the Compute calls, by
// the names of the RPCs of Compute Engine's InstanceGroupManagers
// service (AggregatedList, Get): a fault's gRPC code is answered as
// Google's JSON APIs map it (UNAVAILABLE: 503, DEADLINE_EXCEEDED: 504),
// with the code's name as the error's status.
// Faults of what GKE does after it accepts a call are the simulator's own:
// FailNextOperation (the operation ends with an error), LoseOperation and
// LoseNextOperations (GetOperation answers NOT_FOUND, the work still
// happens) and Stockout.
//
// Tests change the state out of band through Server: RemoveNodePool,
// ResizeNodePool, BreakNodePool, Autoscale, AutoscaleZones, and UpgradeMaster or UpgradeMasterFor
// (a release-channel upgrade). Cluster, NodePool, NodeCounts and Operations
// inspect the state.
//
// IAM. With WithIAM the simulator authenticates and authorizes every
// call, per project: the caller is the identity of the request's
// "authorization: Bearer" token, which IAM.Identify resolves (the IAM
// Credentials emulator's Server.Identify, for the tokens it issued, its
// own principals' and the impersonated service accounts' alike). A call
// without a token, or with one Identify does not know, is UNAUTHENTICATED
// with Google's messages; a call into a project whose identities
// (IAM.Projects, Server.SetProjectIAM) do not include the caller is
// PERMISSION_DENIED `Required "container.clusters.create" permission(s)
// for "projects/P".`, naming the permission the method needs (GKE's table:
// container.clusters.create, list, get, delete, update and
// container.operations.get, list) and what it is checked on (the project,
// the cluster, or the operation). Refused calls do not count against the
// project's request quota. Without WithIAM nothing is checked.
//
// Persistence. Server.Snapshot writes the clusters, node pools and
// operations as JSON (protojson for the API's messages): running
// operations with their end time and what they will do when they end,
// which is decided when they start (the stockouts and injected failures
// they took). Server.Restore puts them into another server: running
// operations go on until their end time on its clock, and those whose end
// passed while nothing served them complete at the first call, in the
// order they end, so a restart is invisible to a client but for the time
// it took. Snapshot can call a function while it holds the simulator
// still, so that a caller reads another emulator's state as of the same
// instant: the devstack writes the Firestore documents and this state
// together, every second, into its -data file. Faults still to inject
// (FailNext, SetLatency, FailNextOperation, LoseNextOperations, Stockout)
// and call counts are not saved.
//
// Kubernetes. With WithKubernetes, every cluster created from then on
// gets a real Kubernetes API server (package kubesim: kube-apiserver built
// from source, with its etcd, one process per cluster), so that a client
// can server-side apply objects into it and see its Nodes:
//
//   - Once the create operation ends, GetCluster reports endpoint
//     127.0.0.1:<port>, a listener the simulator opened for the cluster
//     (real GKE reports an IP address and serves on port 443), and
//     masterAuth.clusterCaCertificate, the base64 of the PEM CA that
//     signed the server's certificate (for 127.0.0.1 and localhost), as
//     GKE does. Before that the endpoint is empty and refuses connections.
//   - The API server starts on demand, at the first request to the
//     endpoint, so that clusters nobody reaches cost nothing (each server
//     takes about 300 MB); with Kubernetes.AtCreate, a created cluster's
//     starts at once, while it provisions, as GKE's control plane comes up
//     within the create operation. The simulator serves the endpoint
//     itself (TLS with a certificate of the cluster's CA, as the
//     server's own) and proxies each request to the server. A request
//     waits for the start, including the build of the binary when
//     Kubernetes.Binary waits for one, and for the registration of the
//     cluster's Nodes, so that the first client finds them, as in GKE;
//     past 10 seconds it is answered 503 with Retry-After, which
//     client-go retries, while the start goes on. Once started, it runs
//     until no request has been under way for Kubernetes.IdleTimeout (a
//     minute by default) with nothing of the simulator's pending in it (a
//     step of the loop below failing, a Node bcd selects not joined), or
//     until the cluster is deleted or the simulator closes; its state
//     stays on disk and the next request starts it again, as at the
//     first. At most Kubernetes.MaxRunning (8 by default) run at once,
//     firmly: a start beyond them stops the least recently used server
//     that serves no request and has served none for 2 seconds, or waits,
//     first come first served, until one can be. A keep-alive connection
//     with no request on it holds nothing: its next request starts the
//     server again. A request under way, a watch included, is never cut
//     for either. A server that exits on its own is started again by the
//     next request.
//   - Clients authenticate with bearer tokens: the cluster's admin token
//     (Server.KubernetesAccess, which also gives a kubeconfig; group
//     system:masters), Kubernetes.Tokens, and, with WithIAM, Google
//     access tokens, as GKE takes them: each API server asks the
//     simulator (kube-apiserver's webhook token authentication, over
//     HTTPS) who a token stands for (IAM.Identify), and the token is
//     accepted, as that identity's email, when the cluster's project
//     allows the identity in (IAM.Projects, Server.SetProjectIAM);
//     otherwise the API server answers 401. RBAC authorizes, then the
//     simulator's IAM (webhook authorization): an identity allowed in the
//     project may do anything in its clusters, as roles/container.admin
//     gives. The simplification: GKE maps each IAM role to its own
//     Kubernetes permissions (roles/container.developer cannot change
//     RBAC, roles/container.viewer only reads) and authenticates any
//     Google identity, leaving one with no role 403 rather than 401; here
//     access is all or nothing per project, like the GKE API's, and none
//     is 401. Answers are kept KubernetesAuthCacheTTL (2 s) by the API
//     servers, so an IAM change or an expired token is felt within it.
//   - While its server runs, a loop (every Kubernetes.SyncInterval)
//     registers a Node for each node of each node pool (nodeCount per
//     zone of the pool's locations), named gke-<cluster>-<pool>-<8 hex
//     naming the zone's instance group>-<4 characters>, deterministic for
//     a pool, with GKE's labels (cloud.google.com/gke-nodepool,
//     topology.kubernetes.io/zone and region,
//     node.kubernetes.io/instance-type, kubernetes.io/hostname,
//     cloud.google.com/gke-spot, cloud.google.com/gke-accelerator, and
//     the pool's own labels, GKE's winning), the pool's taints, spec.providerID
//     gce://<project>/<zone>/<name>, a Ready condition and a capacity
//     derived from the machine type. Nodes go when their pool shrinks or
//     goes; a shrink removes the last-named ones.
//   - It plays bcd: for every Node that the DaemonSet bcd in namespace
//     better-compute-system selects (its nodeSelector, its required node
//     affinity, its tolerations of the Node's NoSchedule and NoExecute
//     taints, plus those the DaemonSet controller adds), it reads the
//     environment of the DaemonSet's first container as the kubelet
//     would give it to bcd (BCD_JOIN_URL, BCD_POOL_ID and BCD_TOKEN, each
//     a value or a key of a Secret of the namespace, and BCD_NODE_NAME, a
//     value or the downward API's spec.nodeName) and calls POST
//     <BCD_JOIN_URL> with Authorization: Bearer <BCD_TOKEN> and body
//     {"nodeName": <BCD_NODE_NAME>, "providerId": the Node's}, as bcd
//     does when it starts on a node. Like bcd, it does not start without
//     all four: a DaemonSet that misspells one, or names a Secret or key
//     that is not there, joins no node; the simulator logs why, and the
//     failing step keeps the API server from idling. The names are bcd's,
//     spelled by the simulator and its tests, never taken from the
//     product, with which they would then agree whatever it said. A node
//     joins once per token: a new token in the Secret makes every node
//     join again. Failed calls are retried with backoff (1 s
//     doubling to 30 s). A node that the DaemonSet stops selecting, or a
//     deleted DaemonSet, is forgotten, so it joins again when selected
//     again. The joins are remembered in memory only: after Restore, the
//     nodes join again.
//   - A bare API server runs no controllers. The simulator does only
//     this of their work: the namespace controller's finalization (a
//     deleted Namespace's objects are deleted, at once, then its
//     "kubernetes" finalizer is removed, so the Namespace disappears),
//     the node lifecycle controller's removal of the not-ready taint
//     admission puts on a new Node, and the kubelet's Node registration
//     and status. Nothing else: a DaemonSet (or any workload) gets no
//     Pods, nothing is garbage-collected (ownerReferences are ignored),
//     there is no scheduler, no kubelet, no Service networking, and Node
//     heartbeats are never renewed. GPU nodes lack GKE's
//     nvidia.com/gpu=present:NoSchedule taint and GPU capacity.
//   - Deleting the cluster (when its DELETE_CLUSTER operation ends) stops
//     its server and removes its state. Snapshot saves each cluster's
//     endpoint port, CA (with its key) and admin token; Restore into a
//     simulator with the same Kubernetes.Dir, where the servers' etcd data
//     live, reopens the endpoints on the same ports (another one, with a
//     warning, if the port is taken) so that clients and kubeconfigs keep
//     working. Without WithKubernetes, Restore leaves such clusters'
//     endpoints answering nothing, and clusters created without it never
//     get an API.
//
// Without WithKubernetes nothing of this runs: no listener or process per
// cluster, and the endpoint is a documentation address (203.0.113.x).
//
// RPCs not served. The simulator serves what someone calls: the product,
// the official clients the repository runs against it, and the devstack's
// users (emulators/README.md names who calls each RPC). The other RPCs of
// ClusterManager (the older Set* forms of UpdateCluster, IP rotation,
// node pool management, upgrade rollback and completion, upgrade info,
// UpdateMaster, CancelOperation, GetJSONWebKeys, ListUsableSubnetworks,
// CheckAutopilotCompatibility) answer UNIMPLEMENTED, once the faults,
// IAM and the request quota, which apply to every RPC, have let them by.
//
// Differences from GKE:
//   - Stockouts: which of its forms GKE chooses when is not recorded, so
//     a test chooses (StockoutAs). The instance group manager's duration
//     is the operation time, and the instance named is the zone's first
//     missing Node. GKE's multi-host ("Atomic resize failed with
//     [GCE_STOCKOUT]") and reservation forms are not modelled.
//   - The catalog is small and fixed: eight regions (us-central1,
//     us-east1, us-west1, us-west2, europe-west1, europe-west4,
//     asia-southeast1, northamerica-northeast1), the e2, n1, n2, n2d, c3, n4, g2 and a2 shapes, GPUs nvidia-l4 (built into g2),
//     nvidia-tesla-a100 and nvidia-a100-80gb (built into a2), and
//     nvidia-tesla-t4, -p4, -v100 (attachable to n1). Quotas: the
//     concurrent-operations one, and with WithRequestQuota or
//     SetRequestQuota a per-project "Requests per minute" quota, counted
//     per clock minute of the server's clock (GKE's refill is its own)
//     and refused with RESOURCE_EXHAUSTED; Usage reports it. Resource
//     quotas (CPUs, addresses, GPUs of a region) are not modelled: a test
//     fails an operation with one through FailNextOperation.
//   - Versions: GetServerConfig offers the four channels' versions (the
//     same for every location); an alias (1.33, 1.33.4) resolves to the
//     newest of them of that release (for a node pool, no newer than the
//     master); a version of another minor release is refused as GKE
//     words it, `Master version "1.29.1-gke.100" is unsupported.` (`Node
//     version ...` for a pool), but any build of an offered minor release
//     is accepted, where GKE accepts only those it still serves. A cluster
//     that asks for a version and no channel is enrolled in the most
//     stable of STABLE, REGULAR and RAPID offering it (recorded: STABLE
//     for a 1.34 that STABLE offered; whether GKE ever picks EXTENDED so
//     is not recorded). Release channels only choose
//     the initial version; upgrades happen when a test calls
//     UpgradeMaster or UpgradeMasterFor (the next build, NextVersion,
//     over a chosen time). Node pools are never upgraded automatically.
//   - Node counts: as in GKE, a pool's initial_node_count is its created
//     size until SetNodePoolSize makes the new size its
//     initial_node_count, and new autoscaling bounds resize nothing;
//     instanceGroupUrls name one group per zone. The per-zone count is
//     exposed through Server.NodeCounts, since GKE only shows it through
//     Compute Engine, whose instanceGroupManagers (which the recordings
//     read) are not part of this API. The cluster's currentNodeCount is
//     the live total at once, where GKE's lags: the recording showed 2
//     right after a resize to 3 nodes in all was DONE. The autoscaler
//     never acts on its own: Server.Autoscale moves the size, and
//     Server.ResizeNodePool moves it behind the API's back, leaving
//     initial_node_count. A failed resize (a stockout) leaves
//     initial_node_count as it was; no recording shows what GKE does.
//     Total autoscaling bounds are in no recording (those replayed send
//     0): GKE's words for a per-zone minimum beside a total maximum (or
//     a total minimum beside a per-zone maximum) and for totals out of
//     order are not known, nor is any ceiling GKE puts on a total, which
//     the simulator leaves unbounded; the location policy does not steer
//     Server.Autoscale, which the test spreads itself.
//   - Operation types, as recorded: autoscaling changes (UpdateCluster's
//     desiredNodePoolAutoscaling or SetNodePoolAutoscaling) and cluster
//     updates and label changes report UPDATE_CLUSTER; a pool's taint
//     change UPGRADE_NODES, which the simulator also reports for its label
//     and version changes (recorded: taints only); a change of locations
//     alone reports UPDATE_CLUSTER (not recorded). Operations carry no
//     progress metrics.
//   - Changes the simulator does not model are accepted, as GKE accepts
//     them, and kept, not acted on: UpdateCluster's other fields (an
//     UPDATE_CLUSTER operation; cluster autoscaling with node
//     auto-provisioning, the auto-provisioned pools' network tags and
//     database encryption are read back, the rest is not),
//     SetMaintenancePolicy (UPDATE_CLUSTER;
//     the policy is read back with a resourceVersion of the simulator's
//     own, which is not checked, and nothing is ever upgraded by it), and
//     UpdateNodePool's other fields (UPGRADE_NODES; those NodeConfig has
//     under the same name, kubelet_config among them, are read back, and
//     machine type and disk are checked as a new pool's; nodes are not
//     recreated). Node pool autoscaling or a master version together with
//     another UpdateCluster field (desired_node_pool_id and etag apart) is
//     INVALID_ARGUMENT in the API's own rule for ClusterUpdate, "Exactly
//     one update can be applied to a cluster with each request, so at most
//     one field can be provided: F, G." naming the fields: GKE's words for
//     it are in no public trace found, and no recording sends either with
//     another field. Any other fields are accepted together, as GKE took
//     desiredLoggingService with desiredMonitoringService
//     (containercluster-zonal); which other pairs GKE refuses is not
//     recorded. UpdateCluster's desired_locations are
//     checked as a create's (zones of the cluster's region; a zonal
//     cluster's must include its zone, as gcloud documents) and, as GKE
//     does, move every node pool: a zone a pool keeps keeps its nodes, a
//     new one gets as many as the pool's busiest zone. Its
//     desired_addons_config replaces each addon it configures and keeps
//     the others (GKE's handling of addons left out is not recorded).
//     SetLabels refuses a label_fingerprint other than
//     the cluster's with FAILED_PRECONDITION (GKE's wording for it is not
//     recorded); fingerprints and etags are the simulator's own.
//   - Read back, clusters and pools lack what the simulator does not
//     model: networking (clusterIpv4Cidr, ipAllocationPolicy,
//     networkConfig, podRange), addons other than those set (GKE's
//     defaults for them), endpoint and DNS configuration,
//     logging and monitoring configuration, the
//     pool's bootDisk, effectiveCgroupMode, loggingConfig
//     and the goog-gke-node-pool-provisioning-model resource label, and
//     the operations' progress. The replay tests compare only the fields
//     the simulator models: of the recordings of addons, private nodes,
//     control plane endpoints, workload identity, boot disk encryption,
//     default compute classes, advanced machine features, swap,
//     containerd and data cache configuration, in-transit encryption,
//     DNS endpoints, additional subnets and pod ranges, the simulator
//     keeps what the request sent and shows it back (compared for the
//     ephemeral local SSDs and the Linux node configuration, which GKE
//     showed as sent), without GKE's defaults for the rest of those
//     messages (the workload pool, the private endpoint, the addons'
//     defaults, the network's short name), which are not compared;
//     UpdateCluster's changes of them (in-transit encryption, control
//     plane endpoints, default private nodes, additional IP ranges and
//     pod ranges) are accepted and not read back, where GKE shows them.
//     Database encryption is shown as GKE showed it in every recording:
//     DECRYPTED (CURRENT_STATE_DECRYPTED) unless asked ENCRYPTED with a
//     key, which reads back ALL_OBJECTS_ENCRYPTION_ENABLED (and its
//     currentState); an update to DECRYPTED keeps the key among
//     decryptionKeys. What GKE shows while such an update runs (the
//     PENDING states), and whether it refuses ENCRYPTED without a key,
//     is not recorded: the simulator shows the new state when the
//     operation ends and refuses nothing; the key is not checked against
//     Cloud KMS. A region's default zones are its first three in name
//     order; GKE chooses (recorded: us-west2-c, -a, -b), and a
//     client must not rely on their order. The 8 hex of an instance group
//     name are a hash of the simulator's own. The recordings are of the
//     v1beta1 REST API; the simulator serves v1 over gRPC, so its links
//     say v1. Request paths must name the project by ID: a project number
//     in a path names another project.
//   - Deleting a cluster needs it idle (GKE can delete a cluster that is
//     still being created). A successful operation on a pool in ERROR or
//     RUNNING_WITH_ERROR makes it RUNNING.
//   - Operation IDs, cluster IDs and etags are random; project numbers are
//     made up from the project ID (ProjectNumber). No ErrorInfo details
//     are attached to errors, and the busy refusal's wording for a
//     running resize, autoscaling or update is the terse one (GKE's is
//     not recorded).
//   - IAM (WithIAM) is per project and all or nothing: an identity allowed
//     in a project has every permission there, as with
//     roles/container.admin; custom roles, cluster-level conditions and
//     iam.serviceAccounts.actAs on the nodes' service account are not
//     checked, nor are the token's scopes. The policy is not saved by
//     Snapshot. Without WithIAM nothing is authenticated or authorized.
//   - Operations are kept for the life of the server, and in its
//     snapshots.
//   - Node labels: which keys GKE refuses is inferred from two quoted
//     errors (cloud.google.com/compute-class; node-role.kubernetes.io/...).
//     The simulator refuses every key under cloud.google.com/,
//     kubernetes.io/ or k8s.io/ and their subdomains; GKE may accept some
//     of them (node.kubernetes.io/, which kubelets may set, say), or
//     refuse others (gke.io, say). The first such key in key order is
//     named; GKE's order is not recorded. The gRPC code is
//     INVALID_ARGUMENT, as GKE's HTTP 400 badRequest maps.
//   - From the recordings replayed last (containercluster-maintenancepolicy,
//     containercluster-autoscaling, containernodepool-kubeletconfig,
//     containernodepool-enableconfidentialnodes): GKE chose us-central1-a,
//     -c and -f for a regional us-central1 cluster, the simulator the
//     first three (g2 is missing from us-central1-f in the catalog, so
//     GKE's choice would fail GPU pools created without locations; the
//     replay reads the recorded -f as -b; likewise of
//     containercluster-ipallocationpolicy-range and
//     containernodepool-resourcemanagertags). GKE showed a pool's kubelet
//     maxParallelImagePulls 3 after an update that did not set it (2
//     before), on e2 nodes without local SSDs; the simulator keeps 2 (not
//     compared). Its default is 3 on nodes with local SSDs, 2 on others
//     (recorded: pools with ephemeral storage on local SSD,
//     containercluster-datacache, containernodepool-datacache and the
//     swap recordings; local_ssd_count and local NVMe block SSDs are
//     taken alike, not recorded, and machine types with built-in local
//     SSDs, such as c3-standard-4-lssd, are not in the catalog). A pool operation's
//     answer was RUNNING in a zonal cluster where the simulator answers
//     PENDING; both are recorded, and the replay takes either. The
//     maintenance policy's resourceVersion is GKE's own and not compared.
//   - Resource Manager tags on nodes (a pool's resource_manager_tags, on
//     create and UpdateNodePool) must exist, as in GKE, which refused a
//     missing one (containernodepool-resourcemanagertags) with
//     PERMISSION_DENIED "Permission denied: for
//     service-N@container-engine-robot.iam.gserviceaccount.com on TagKey
//     "tagKeys/123" (or it may not exist)."; the simulator has no
//     Resource Manager, so a test makes its tags exist with
//     Server.AddTags (not saved by Snapshot). A missing value of an
//     existing key is refused in the same form naming the TagValue
//     (inferred, not recorded), the first missing tag in key order is
//     named (GKE's order is not recorded), and the service agent's
//     permission on a tag that exists is not checked. The cluster-level
//     tags of auto-provisioned pools (node_pool_auto_config) are not
//     checked.
//   - Queued provisioning (queuedProvisioning, reservation affinity): a
//     pool reads back as GKE showed it (containernodepool-queuedprovisioning:
//     SHORT_LIVED upgrades, locationPolicy ANY, the gke-queued taint), and
//     nothing of its behaviour is modelled (no ProvisioningRequest waits:
//     its nodes come as any pool's).
//   - Recordings not replayed: of Config Connector's container fixtures,
//     those recorded against its mock only are no evidence (26-character
//     CA certificates, version 1.30.5-gke.1014001, compute/v1beta1 links,
//     instance group answers without standbyPolicy, versions and
//     serviceAccount): containercluster-resourcemanagertags (-autopilot,
//     -standard), -labels, -autoscaling-basic, -dataplanev2,
//     -rm-default-np-strip-config, -rm-default-np-with-node-config,
//     -confidentialnodes, -confidentialnodes-defaulttype,
//     -controlplanediskencryptionkey, -systemconfig, -advanced-features,
//     -clientcertificateconfig, -disablel4lbfirewall, -parallelstore;
//     containernodepool-windowsnodeconfig, -confidentialnodes,
//     -confidentialnodes-defaulttype, -removetaint,
//     containernodepoolremovetaint, -systemconfig,
//     containernodepoolnestedvirt. Their requests were sent to the
//     simulator once and each accepted or refused as the mock recorded.
//     containercluster-containerdconfig @787f956a3c holds a real refusal
//     of a create, INVALID_ARGUMENT "The cert field in client is
//     required.", three times, once for a request with a whole
//     certificate and key that GKE accepted in a like request two days
//     later (b52147b214, replayed): no rule can be drawn from it, and the
//     simulator refuses nothing of the kind.
//   - Compute Engine: the scopes are the catalog's, where Compute Engine
//     answers every region and zone there is (and "global" for some
//     resources); no aggregatedList of instance groups is recorded, so its
//     scopes are taken from another resource's. A group keeps its
//     instance template for life, where GKE's took a new one (other 8
//     hex) after an update that recreates the nodes (recorded: taints,
//     kubelet, Linux node (swap) and containerd configuration; not
//     compared). The group's id is the
//     simulator's, creationTimestamp, fingerprint, updatePolicy,
//     instanceLifecyclePolicy and the other fields the recordings show are
//     absent, and serviceAccount (${projectNumber}@cloudservices...), which
//     the official Go client does not read, is not compared. One
//     recording's Compute answers (containercluster-disablel4lbfirewallreconciliation)
//     were of Config Connector's mock (compute/v1beta1 links, a group name
//     without its 8 hex) and are not replayed.
package gke
