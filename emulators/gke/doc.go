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
// It serves CreateCluster, GetCluster, ListClusters, DeleteCluster,
// UpdateMaster, CreateNodePool, GetNodePool, ListNodePools,
// DeleteNodePool, SetNodePoolSize, SetNodePoolAutoscaling, UpdateNodePool,
// GetOperation, ListOperations and CancelOperation; every other RPC
// answers UNIMPLEMENTED. Requests may use the name/parent form
// (projects/P/locations/L/clusters/C[/nodePools/NP]) or the deprecated
// project_id/zone/cluster_id/node_pool_id fields.
//
// As in GKE, every mutation returns a long-running Operation, RUNNING
// until the operation time (WithOperationTime, DefaultOperationTime
// otherwise) has passed on the injected clock (WithNow), then DONE with an
// endTime and, on failure, an error and statusMessage. Completion is
// evaluated on every call from the clock rather than by timers, so a fake
// clock makes tests deterministic. Meanwhile clusters are PROVISIONING
// (create), STOPPING (delete) or RECONCILING (any other operation on the
// cluster or one of its pools), and node pools PROVISIONING, RECONCILING
// or STOPPING. A cluster-level operation needs the cluster idle; a node
// pool operation needs no cluster-level operation and none on the same
// pool; otherwise FAILED_PRECONDITION "Cluster is running incompatible
// operation ...". A sixth concurrent operation on a cluster is
// RESOURCE_EXHAUSTED.
//
// Refusals. What GKE checks when it accepts a request is refused
// synchronously with INVALID_ARGUMENT: names, unknown locations, node
// locations outside the cluster's region, unknown machine types,
// accelerators the machine family cannot take or counts its shape does not
// have, disk types the family does not support, bad autoscaling bounds,
// versions newer than the master. What GKE only finds out while it works
// makes the operation end with an error instead: a machine type the zone
// does not offer (g2 in us-central1-f and europe-west1-d; a2 in
// europe-west4-c, us-east1-d and us-west1-c) leaves the pool ERROR, a
// stockout (Server.Stockout) leaves it RUNNING_WITH_ERROR with a
// ZONE_RESOURCE_POOL_EXHAUSTED message, and Server.FailNextOperation fails
// any operation. A cluster whose create failed is ERROR.
//
// Tests drive faults and out-of-band changes through Server: FailNext
// (fail the next n calls of an RPC), SetLatency, FailNextOperation,
// LoseOperation and LoseNextOperations (GetOperation answers NOT_FOUND,
// the work still happens), Stockout, RemoveNodePool, ResizeNodePool,
// BreakNodePool, Autoscale, and UpgradeMaster (a release-channel
// upgrade). Calls counts the calls of each RPC; Cluster, NodePool,
// NodeCounts and Operations inspect the state.
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
// Differences from GKE:
//   - The catalog is small and fixed: six regions (us-central1, us-east1,
//     us-west1, europe-west1, europe-west4, asia-southeast1), the e2, n1,
//     n2, n2d, c3, g2 and a2 shapes, GPUs nvidia-l4 (built into g2),
//     nvidia-tesla-a100 and nvidia-a100-80gb (built into a2), and
//     nvidia-tesla-t4, -p4, -v100 (attachable to n1). Quotas: the
//     concurrent-operations one, and with WithRequestQuota or
//     SetRequestQuota a per-project "Requests per minute" quota, counted
//     per clock minute of the server's clock (GKE's refill is its own)
//     and refused with RESOURCE_EXHAUSTED; Usage reports it. Resource
//     quotas (CPUs, addresses, GPUs of a region) are not modelled: a test
//     fails an operation with one through FailNextOperation.
//   - Versions are full GKE versions (1.33.4-gke.1000) or "latest"/"-";
//     aliases such as "1.33" are refused. Release channels only choose
//     the initial version; upgrades happen when a test calls
//     UpgradeMaster. Node pools are never upgraded automatically.
//   - Node counts: like GKE, initial_node_count keeps its created value
//     and instanceGroupUrls name one group per zone; the cluster's
//     currentNodeCount is the live total. The per-zone count is exposed
//     through Server.NodeCounts, since GKE only shows it through Compute
//     Engine. The autoscaler never acts on its own: Server.Autoscale moves
//     the size; enabling autoscaling clamps the size into the bounds when
//     the operation ends.
//   - Autoscaling changes report operation type UPDATE_CLUSTER, location
//     and label changes UPDATE_CLUSTER, version changes UPGRADE_NODES.
//   - UpdateNodePool applies only node_version, locations, labels and
//     taints; any other field is refused with INVALID_ARGUMENT.
//   - Deleting a cluster needs it idle (GKE can delete a cluster that is
//     still being created). A successful operation on a pool in ERROR or
//     RUNNING_WITH_ERROR makes it RUNNING.
//   - Operation IDs, cluster IDs and etags are random; selfLinks use the
//     project ID, not the project number. Nothing is authenticated or
//     authorized, and no ErrorInfo details are attached to errors.
//   - Operations are kept for the life of the server, and in its
//     snapshots.
package gke
