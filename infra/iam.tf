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

locals {
  # Every runtime identity reads and writes Firestore, publishes events
  # (relay and drains) and enqueues reconcile runs.
  runtime = {
    api        = google_service_account.api.email
    reconciler = google_service_account.reconciler.email
    watchdog   = google_service_account.watchdog.email
  }
}

# Firestore has no finer resource than the project for data access roles.
resource "google_project_iam_member" "datastore_user" {
  for_each = local.runtime
  project  = var.project
  role     = "roles/datastore.user"
  member   = "serviceAccount:${each.value}"
}

resource "google_pubsub_topic_iam_member" "publisher" {
  for_each = { for pair in setproduct(keys(local.runtime), local.event_types) : "${pair[0]}/${pair[1]}" => pair }
  topic    = google_pubsub_topic.events[each.value[1]].name
  role     = "roles/pubsub.publisher"
  member   = "serviceAccount:${local.runtime[each.value[0]]}"
}

resource "google_cloud_tasks_queue_iam_member" "enqueuer" {
  for_each = local.runtime
  name     = google_cloud_tasks_queue.reconcile.name
  location = google_cloud_tasks_queue.reconcile.location
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
# the accounts' projects.
resource "google_project_iam_member" "reconciler_gke" {
  for_each = toset(var.platform_projects)
  project  = each.value
  role     = "roles/container.clusterAdmin"
  member   = "serviceAccount:${google_service_account.reconciler.email}"
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
