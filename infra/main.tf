# The production deployment of the node-pool control plane: one container
# image, one Cloud Run service per function (FUNCTION_TARGET), Firestore,
# Pub/Sub topics per event type, the subscriptions that push the pools
# module's events to the pool substrates' consumer, the reconcile queues, the
# watchdog's schedule, least-privilege service accounts, and an HTTPS load
# balancer mapping POST /api/compute/{resource}/{method} to the API
# functions.
#
# State lives in a GCS bucket given at init:
#   terraform init -backend-config=bucket=BUCKET -backend-config=prefix=compute

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.0, < 8.0"
    }
  }
  backend "gcs" {}
}

provider "google" {
  project = var.project
  region  = var.region
}

data "google_project" "this" {}

locals {
  # Every API function: its Functions Framework name, its Cloud Run
  # service (service names must be lowercase), its public path and its
  # runtime identity (local.runtime): the join method, which bcd calls
  # with a join token, is the one API function that reads the clusters'
  # Kubernetes APIs, so it runs as an account of its own.
  api_functions = {
    "kubernetesNodePools-create"     = { service = "${var.prefix}-nodepools-create", path = "/api/compute/kubernetesNodePools/create", account = "api" }
    "kubernetesNodePools-list"       = { service = "${var.prefix}-nodepools-list", path = "/api/compute/kubernetesNodePools/list", account = "api" }
    "kubernetesNodePools-update"     = { service = "${var.prefix}-nodepools-update", path = "/api/compute/kubernetesNodePools/update", account = "api" }
    "kubernetesNodePools-delete"     = { service = "${var.prefix}-nodepools-delete", path = "/api/compute/kubernetesNodePools/delete", account = "api" }
    "kubernetesClusters-create"      = { service = "${var.prefix}-clusters-create", path = "/api/compute/kubernetesClusters/create", account = "api" }
    "kubernetesClusters-get"         = { service = "${var.prefix}-clusters-get", path = "/api/compute/kubernetesClusters/get", account = "api" }
    "kubernetesClusters-list"        = { service = "${var.prefix}-clusters-list", path = "/api/compute/kubernetesClusters/list", account = "api" }
    "kubernetesClusters-delete"      = { service = "${var.prefix}-clusters-delete", path = "/api/compute/kubernetesClusters/delete", account = "api" }
    "kubernetesSubstrates-get"       = { service = "${var.prefix}-substrates-get", path = "/api/compute/kubernetesSubstrates/get", account = "api" }
    "kubernetesSubstrates-list"      = { service = "${var.prefix}-substrates-list", path = "/api/compute/kubernetesSubstrates/list", account = "api" }
    "kubernetesSubstrates-listNodes" = { service = "${var.prefix}-substrates-listnodes", path = "/api/compute/kubernetesSubstrates/listNodes", account = "api" }
    "kubernetesSubstrates-plan"      = { service = "${var.prefix}-substrates-plan", path = "/api/compute/kubernetesSubstrates/plan", account = "api" }
    "kubernetesSubstrates-join"      = { service = "${var.prefix}-substrates-join", path = "/api/compute/kubernetesSubstrates/join", account = "join" }
  }

  reconcile_service   = "${var.prefix}-reconcile"
  watchdog_service    = "${var.prefix}-watchdog"
  pool_events_service = "${var.prefix}-pool-events"

  # Cloud Run's deterministic service URLs. Knowing them before the
  # services exist breaks the cycle "a service's environment names its own
  # URL" (the audience of its OIDC tokens) and "the API names the reconcile
  # URL".
  run_url         = "https://%s-${data.google_project.this.number}.${var.region}.run.app"
  reconcile_url   = format(local.run_url, local.reconcile_service)
  watchdog_url    = format(local.run_url, local.watchdog_service)
  pool_events_url = format(local.run_url, local.pool_events_service)

  # The API's public URL, and the join method's, which bcd on the
  # substrates' nodes calls through the HTTPS entry (SUBSTRATE_JOIN_URL).
  api_url  = "https://${var.domain}/api/compute"
  join_url = "${local.api_url}/kubernetesSubstrates/join"

  event_types = [
    "kubernetes.nodepool.created",
    "kubernetes.nodepool.ready",
    "kubernetes.nodepool.error",
    "kubernetes.nodepool.deleted",
    "kubernetes.cluster.created",
    "kubernetes.cluster.ready",
    "kubernetes.cluster.updated",
    "kubernetes.cluster.error",
    "kubernetes.cluster.deleted",
    "kubernetes.substrate.ready",
    "kubernetes.substrate.updated",
    "kubernetes.substrate.error",
    "kubernetes.substrate.deleted",
    "kubernetes.substrate.node.joined",
    "kubernetes.substrate.node.left",
  ]

  # The pools module's event types that kubernetesSubstrates-poolEvents
  # consumes (pubsub.tf), and the project of their topics.
  pool_event_types    = ["compute.pool.updated", "compute.pool.archived"]
  pool_events_project = var.pool_events_project != "" ? var.pool_events_project : var.project

  services = [
    "run.googleapis.com",
    "firestore.googleapis.com",
    "pubsub.googleapis.com",
    "cloudtasks.googleapis.com",
    "cloudscheduler.googleapis.com",
    "compute.googleapis.com",
    "iam.googleapis.com",
    # The reconciler impersonates tenants' service accounts.
    "iamcredentials.googleapis.com",
    "artifactregistry.googleapis.com",
    "container.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
  ]
}

resource "google_project_service" "apis" {
  for_each           = toset(local.services)
  service            = each.value
  disable_on_destroy = false
}

# The image registry. Cloud Build pushes to it before Terraform runs, so on
# a new project apply it first:
#   terraform apply -target=google_artifact_registry_repository.functions
resource "google_artifact_registry_repository" "functions" {
  location      = var.region
  repository_id = "functions"
  format        = "DOCKER"
  description   = "Images of the control plane's functions"
  depends_on    = [google_project_service.apis]
}
