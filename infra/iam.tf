# Runtime identities, one per kind of function, each with only what its
# code calls. The callers of the internal functions have identities of
# their own that can invoke exactly one service.

resource "google_service_account" "api" {
  account_id   = "${var.prefix}-api"
  display_name = "API functions"
}

resource "google_service_account" "reconciler" {
  account_id   = "${var.prefix}-reconciler"
  display_name = "Reconcile function"
}

resource "google_service_account" "join" {
  account_id   = "${var.prefix}-join"
  display_name = "kubernetesSubstrates.join function"
}

resource "google_service_account" "pool_events" {
  account_id   = "${var.prefix}-pool-events"
  display_name = "kubernetesSubstrates-poolEvents function"
}

resource "google_service_account" "watchdog" {
  account_id   = "${var.prefix}-watchdog"
  display_name = "Watchdog function"
}

# The identity of the reconcile tasks' OIDC tokens.
resource "google_service_account" "tasks" {
  account_id   = "${var.prefix}-tasks"
  display_name = "Cloud Tasks caller of the reconcile function"
}

# The identity of the watchdog job's OIDC tokens.
resource "google_service_account" "scheduler" {
  account_id   = "${var.prefix}-scheduler"
  display_name = "Cloud Scheduler caller of the watchdog function"
}

# The identity of the nodes of every cluster and node pool the reconciler
# creates (NODE_SERVICE_ACCOUNT), instead of each platform project's
# Compute Engine default account and its Editor role.
resource "google_service_account" "nodes" {
  account_id   = "${var.prefix}-nodes"
  display_name = "Nodes of the managed GKE clusters"
}

locals {
  # Every runtime identity reads and writes Firestore and enqueues
  # reconcile runs.
  runtime = {
    api         = google_service_account.api.email
    join        = google_service_account.join.email
    reconciler  = google_service_account.reconciler.email
    watchdog    = google_service_account.watchdog.email
    pool_events = google_service_account.pool_events.email
  }
  # Those that publish events (their relay, the watchdog's drains): all but
  # the pool events' consumer, which records substrates and kicks their
  # chains, and announces nothing itself.
  publishers = { for k, v in local.runtime : k => v if k != "pool_events" }
}

# Firestore has no finer resource than the project for data access roles.
resource "google_project_iam_member" "datastore_user" {
  for_each = local.runtime
  project  = var.project
  role     = "roles/datastore.user"
  member   = "serviceAccount:${each.value}"
}

resource "google_pubsub_topic_iam_member" "publisher" {
  for_each = { for pair in setproduct(keys(local.publishers), local.event_types) : "${pair[0]}/${pair[1]}" => pair }
  topic    = google_pubsub_topic.events[each.value[1]].name
  role     = "roles/pubsub.publisher"
  member   = "serviceAccount:${local.publishers[each.value[0]]}"
}

# Every runtime identity enqueues on every reconcile queue: whichever
# tenant's chain it kicks goes to that tenant's queue.
resource "google_cloud_tasks_queue_iam_member" "enqueuer" {
  for_each = { for pair in setproduct(local.change_queues, keys(local.runtime)) : "${pair[0]}/${pair[1]}" => pair }
  name     = google_cloud_tasks_queue.reconcile[each.value[0]].name
  location = google_cloud_tasks_queue.reconcile[each.value[0]].location
  role     = "roles/cloudtasks.enqueuer"
  member   = "serviceAccount:${local.runtime[each.value[1]]}"
}

# The grants on the one queue before there were several.
moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["api"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["reconcile/api"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["join"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["reconcile/join"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["reconciler"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["reconcile/reconciler"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["watchdog"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["reconcile/watchdog"]
}

moved {
  from = google_cloud_tasks_queue_iam_member.enqueuer["pool_events"]
  to   = google_cloud_tasks_queue_iam_member.enqueuer["reconcile/pool_events"]
}

resource "google_cloud_tasks_queue_iam_member" "steady_enqueuer" {
  for_each = local.runtime
  name     = google_cloud_tasks_queue.reconcile_steady.name
  location = google_cloud_tasks_queue.reconcile_steady.location
  role     = "roles/cloudtasks.enqueuer"
  member   = "serviceAccount:${each.value}"
}

# Creating a task whose OIDC token is the tasks identity's needs actAs on
# that identity, and nothing else.
resource "google_service_account_iam_member" "acts_as_tasks" {
  for_each           = local.runtime
  service_account_id = google_service_account.tasks.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${each.value}"
}

# The reconciler creates, resizes and deletes clusters and node pools in
# the accounts' projects: exactly the permissions of the GKE calls it makes
# (shared/clusters.GKE), not roles/container.clusterAdmin, which also
# reads every cluster's credentials and changes any cluster setting; and
# it lists the pools' instance groups (shared/clusters.Compute) for their
# node counts, not roles/compute.viewer, which reads every resource.
resource "google_project_iam_custom_role" "reconciler_gke" {
  for_each    = toset(var.platform_projects)
  project     = each.value
  role_id     = "${replace(var.prefix, "-", "_")}_reconciler"
  title       = "Node pool reconciler"
  description = "The GKE calls of the reconcile function: get, create and delete clusters, add, resize and delete node pools, read operations, list the node pools' instance groups."
  permissions = [
    "container.clusters.create",
    "container.clusters.delete",
    "container.clusters.get",
    "container.clusters.list",
    "container.clusters.update",
    "container.operations.get",
    "container.operations.list",
    "compute.instanceGroupManagers.list",
  ]
}

resource "google_project_iam_member" "reconciler_gke" {
  for_each = toset(var.platform_projects)
  project  = each.value
  role     = google_project_iam_custom_role.reconciler_gke[each.value].name
  member   = "serviceAccount:${google_service_account.reconciler.email}"
}

# Creating a cluster or node pool whose nodes run as the nodes' account
# needs actAs on it, and on no other account.
resource "google_service_account_iam_member" "reconciler_acts_as_nodes" {
  service_account_id = google_service_account.nodes.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.reconciler.email}"
}

# What nodes need: write their logs and metrics in their own project, and
# pull the images this project publishes (the node agents').
resource "google_project_iam_member" "nodes" {
  for_each = { for pair in setproduct(var.platform_projects, ["roles/logging.logWriter", "roles/monitoring.metricWriter"]) : "${pair[0]}/${pair[1]}" => pair }
  project  = each.value[0]
  role     = each.value[1]
  member   = "serviceAccount:${google_service_account.nodes.email}"
}

resource "google_artifact_registry_repository_iam_member" "nodes_pull" {
  location   = google_artifact_registry_repository.functions.location
  repository = google_artifact_registry_repository.functions.name
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${google_service_account.nodes.email}"
}

# The nodes' account lives in this project, the clusters in the platform
# projects: there, GKE's service agent mints the nodes' tokens and Compute
# Engine's attaches the account to the instances. (This project must not
# enforce the organization policy iam.disableCrossProjectServiceAccountUsage.)
data "google_project" "platform" {
  for_each   = toset([for p in var.platform_projects : p if p != var.project])
  project_id = each.value
}

resource "google_service_account_iam_member" "gke_agent_mints_nodes" {
  for_each           = data.google_project.platform
  service_account_id = google_service_account.nodes.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:service-${each.value.number}@container-engine-robot.iam.gserviceaccount.com"
}

resource "google_service_account_iam_member" "compute_agent_uses_nodes" {
  for_each           = data.google_project.platform
  service_account_id = google_service_account.nodes.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:service-${each.value.number}@compute-system.iam.gserviceaccount.com"
}

resource "google_cloud_run_v2_service_iam_member" "tasks_invokes_reconcile" {
  name     = google_cloud_run_v2_service.reconcile.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.tasks.email}"
}

resource "google_cloud_run_v2_service_iam_member" "scheduler_invokes_watchdog" {
  name     = google_cloud_run_v2_service.watchdog.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.scheduler.email}"
}

# The API functions authenticate tenants themselves (their bearer tokens
# are not Google's), so Cloud Run lets every caller through; their ingress
# admits only the load balancer. An organization policy restricting
# allUsers bindings (iam.allowedPolicyMemberDomains) must exempt them.
resource "google_cloud_run_v2_service_iam_member" "public_api" {
  for_each = google_cloud_run_v2_service.api
  name     = each.value.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "allUsers"
}

# Pool substrates (API.md §9).

# The join method reads one Node of a substrate's cluster (kubeapply.Node)
# to check that the node asking to join is one: exactly that in every
# platform project, and container.clusters.get, without which GKE does not
# let an IAM principal reach a cluster's Kubernetes API at all. The
# predefined roles/container.clusterViewer has clusters.get but not Nodes;
# roles/container.viewer reads every object of every cluster (ConfigMaps,
# Pods, ...): more than a Node.
resource "google_project_iam_custom_role" "substrate_join" {
  for_each    = toset(var.platform_projects)
  project     = each.value
  role_id     = "${replace(var.prefix, "-", "_")}_substrate_join"
  title       = "Substrate join"
  description = "kubernetesSubstrates.join: read a Node of a substrate's cluster."
  permissions = [
    "container.clusters.get",
    "container.nodes.get",
  ]
}

resource "google_project_iam_member" "join_kubernetes" {
  for_each = toset(var.platform_projects)
  project  = each.value
  role     = google_project_iam_custom_role.substrate_join[each.value].name
  member   = "serviceAccount:${google_service_account.join.email}"
}

# The substrates' reconciler server-side applies bcd's objects into each
# substrate's cluster (shared/kubeapply.Apply: read each, then apply, which
# creates an object that is missing), deletes them at teardown (Remove) and
# lists the Nodes of its node pools (Nodes), as its Google identity, which
# GKE accepts (container.clusters.get is in reconciler_gke already). The
# objects are the Namespace better-compute-system and in it the
# ServiceAccount bcd, the Secret bcd-join and the DaemonSet bcd: exactly
# get, create, update (patch) and delete of those four kinds, and list of
# Nodes. roles/container.developer would also let it read every
# Secret and exec into every Pod of every cluster, a tenant's adopted ones
# included. IAM cannot narrow these to one namespace; Kubernetes RBAC
# could, but the substrate would first have to write its own RoleBindings
# into clusters that are the tenants' (adopt), which takes more, not less.
resource "google_project_iam_custom_role" "reconciler_kubernetes" {
  for_each    = toset(var.platform_projects)
  project     = each.value
  role_id     = "${replace(var.prefix, "-", "_")}_reconciler_kubernetes"
  title       = "Substrate reconciler in clusters"
  description = "The pool substrates' Kubernetes API calls: apply and delete bcd's Namespace, ServiceAccount, Secret and DaemonSet; read Nodes."
  permissions = [
    "container.daemonSets.create",
    "container.daemonSets.delete",
    "container.daemonSets.get",
    "container.daemonSets.update",
    "container.namespaces.create",
    "container.namespaces.delete",
    "container.namespaces.get",
    "container.namespaces.update",
    "container.nodes.list",
    "container.secrets.create",
    "container.secrets.delete",
    "container.secrets.get",
    "container.secrets.update",
    "container.serviceAccounts.create",
    "container.serviceAccounts.delete",
    "container.serviceAccounts.get",
    "container.serviceAccounts.update",
  ]
}

resource "google_project_iam_member" "reconciler_kubernetes" {
  for_each = toset(var.platform_projects)
  project  = each.value
  role     = google_project_iam_custom_role.reconciler_kubernetes[each.value].name
  member   = "serviceAccount:${google_service_account.reconciler.email}"
}

# The identity of the pool events' push subscriptions' OIDC tokens: it may
# invoke the consumer's service and nothing else.
resource "google_service_account" "pool_events_push" {
  account_id   = "${var.prefix}-pool-events-push"
  display_name = "Pub/Sub push caller of kubernetesSubstrates-poolEvents"
}

resource "google_cloud_run_v2_service_iam_member" "push_invokes_pool_events" {
  name     = google_cloud_run_v2_service.pool_events.name
  location = var.region
  role     = "roles/run.invoker"
  member   = "serviceAccount:${google_service_account.pool_events_push.email}"
}

locals {
  # Pub/Sub's service agent of this project: it mints the push tokens and
  # moves dead letters.
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

# Minting the push subscriptions' OIDC tokens as pool_events_push. Projects
# made since April 2021 grant it to the agent through its own role; older
# ones need it, and only on this account.
resource "google_service_account_iam_member" "pubsub_agent_mints_push" {
  service_account_id = google_service_account.pool_events_push.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.pubsub_agent
}

# Dead-lettering: the agent publishes to the dead-letter topic and
# acknowledges on the subscription it takes the message from.
resource "google_pubsub_topic_iam_member" "pubsub_agent_dead_letters" {
  topic  = google_pubsub_topic.pool_events_dead_letter.name
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "pubsub_agent_forwards" {
  for_each     = google_pubsub_subscription.pool_events
  subscription = each.value.name
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}
