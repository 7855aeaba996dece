# What a tenant applies in its own Google Cloud project so that Better
# Compute runs its clusters there (a tenant's account, the second hosting
# model): a provisioner service account with exactly the permissions of
# Better Compute's calls (GKE's API, and the clusters' Kubernetes APIs for
# its pool substrates), an account for the clusters' nodes, and
# the one grant that lets Better Compute act as the provisioner, with
# short-lived tokens and no key. Revoking that grant (or destroying this
# module) stops Better Compute at once: the clusters and their substrates
# show an error saying what to grant, and recover by themselves once it is
# back.

terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 5.0, < 8.0"
    }
  }
}

resource "google_project_service" "container" {
  project            = var.project
  service            = "container.googleapis.com"
  disable_on_destroy = false
}

# The identity Better Compute acts as in this project, and only here.
resource "google_service_account" "provisioner" {
  project      = var.project
  account_id   = var.provisioner_account_id
  display_name = "Better Compute provisioner"
  description  = "Better Compute's reconciler acts as this account to create, resize and delete the GKE clusters and node pools of this project's Better Compute account."
}

# The identity of the nodes of every cluster and node pool it creates,
# instead of the project's Compute Engine default account and its Editor
# role.
resource "google_service_account" "nodes" {
  project      = var.project
  account_id   = var.nodes_account_id
  display_name = "Nodes of Better Compute's clusters"
}

# Exactly the calls Better Compute makes as the provisioner: the GKE calls
# of its reconciler (get, list, create, update and delete clusters and
# their node pools, read operations; list the node pools' instance groups
# for their node counts), and, in the clusters' Kubernetes
# APIs, the calls of a pool substrate (write and remove bcd's Namespace,
# ServiceAccount, Secret and DaemonSet; read the Nodes, also to check a
# node that joins). Not roles/container.admin, which can also read every
# cluster's credentials, change any of its settings and do anything in
# its Kubernetes API; nor roles/container.developer, which can read every
# Secret of every namespace.
resource "google_project_iam_custom_role" "provisioner" {
  project     = var.project
  role_id     = var.role_id
  title       = "Better Compute provisioner"
  description = "The calls of Better Compute's reconciler: get, list, create, update and delete GKE clusters and node pools, read operations, list the node pools' instance groups; in their Kubernetes APIs, write and remove a pool substrate's objects and read Nodes."
  permissions = [
    "container.clusters.create",
    "container.clusters.delete",
    "container.clusters.get",
    "container.clusters.list",
    "container.clusters.update",
    "container.daemonSets.create",
    "container.daemonSets.delete",
    "container.daemonSets.get",
    "container.daemonSets.update",
    "container.namespaces.create",
    "container.namespaces.delete",
    "container.namespaces.get",
    "container.namespaces.update",
    "container.nodes.get",
    "container.nodes.list",
    "container.operations.get",
    "container.operations.list",
    "container.secrets.create",
    "container.secrets.delete",
    "container.secrets.get",
    "container.secrets.update",
    "container.serviceAccounts.create",
    "container.serviceAccounts.delete",
    "container.serviceAccounts.get",
    "container.serviceAccounts.update",
    "compute.instanceGroupManagers.list",
  ]
}

resource "google_project_iam_member" "provisioner" {
  project = var.project
  role    = google_project_iam_custom_role.provisioner.name
  member  = "serviceAccount:${google_service_account.provisioner.email}"
}

# Creating clusters and node pools whose nodes run as the nodes' account
# needs actAs on it, and on no other account.
resource "google_service_account_iam_member" "provisioner_acts_as_nodes" {
  service_account_id = google_service_account.nodes.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.provisioner.email}"
}

# What nodes need: write their logs and metrics.
resource "google_project_iam_member" "nodes" {
  for_each = toset(["roles/logging.logWriter", "roles/monitoring.metricWriter"])
  project  = var.project
  role     = each.value
  member   = "serviceAccount:${google_service_account.nodes.email}"
}

# The grant Better Compute needs: its reconciler may mint short-lived
# tokens of the provisioner (IAM Credentials API), and nothing else. This
# is the grant the clusters' error names when it is missing.
resource "google_service_account_iam_member" "reconciler_impersonates_provisioner" {
  service_account_id = google_service_account.provisioner.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = "serviceAccount:${var.reconciler_service_account}"
}
