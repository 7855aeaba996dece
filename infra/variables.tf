variable "project" {
  description = "Project that runs the control plane (Cloud Run, Firestore, Pub/Sub, Cloud Tasks)."
  type        = string
}

variable "region" {
  description = "Region of the Cloud Run services, the Cloud Tasks queues and the Cloud Scheduler job."
  type        = string
  default     = "europe-west1"
}

variable "image" {
  description = "Container image of the functions (built from functions/cmd/server), e.g. europe-west1-docker.pkg.dev/P/functions/server:SHA."
  type        = string
}

variable "bcd_image" {
  description = "Container image of bcd, the join daemon the pool substrates run on their nodes (BCD_IMAGE of the reconcile function), e.g. europe-west1-docker.pkg.dev/P/functions/bcd@sha256:...; the nodes can pull from this project's functions repository."
  type        = string
}

variable "pool_events_project" {
  description = "Project of the pools module's topics compute.pool.updated and compute.pool.archived, which it owns; empty: this project. Whoever applies this Terraform needs pubsub.topics.attachSubscription on them (roles/pubsub.subscriber on the topics, granted by the pools module)."
  type        = string
  default     = ""
}

variable "pool_events_max_delivery_attempts" {
  description = "Deliveries of a pool event to kubernetesSubstrates-poolEvents before it goes to the dead-letter topic (5 to 100). The function acknowledges what it can never apply, so only failures that outlast the retries (Firestore or Cloud Tasks down) get there."
  type        = number
  default     = 20
}

variable "prefix" {
  description = "Prefix of the names of the services, accounts and load balancer parts."
  type        = string
  default     = "compute"
}

variable "domain" {
  description = "Domain of the public API; a Google-managed certificate is issued for it once its DNS A record points at the api_ip output."
  type        = string
}

variable "auth_issuer_url" {
  description = "OIDC issuer of tenant tokens (its discovery document is at /.well-known/openid-configuration)."
  type        = string
}

variable "auth_audience" {
  description = "Audience tenant tokens must carry."
  type        = string
}

variable "platform_projects" {
  description = "Projects whose GKE clusters the reconciler manages (the accounts' projects)."
  type        = list(string)
  default     = []
}

variable "firestore_location" {
  description = "Location of the Firestore database (a region such as europe-west1, or a multi-region such as eur3)."
  type        = string
  default     = "eur3"
}

variable "firestore_database" {
  description = "Firestore database ID."
  type        = string
  default     = "(default)"
}

variable "api_max_instances" {
  description = "Upper bound of instances per API function."
  type        = number
  default     = 20
}

variable "reconcile_max_instances" {
  description = "Upper bound of reconcile instances; with their request concurrency (20) it bounds the runs in flight of all queues together, and so the load on Firestore and the GKE API."
  type        = number
  default     = 10
}

variable "tenant_queues" {
  description = "Cloud Tasks queues of changes' and converging chains' runs (reconcile, reconcile-1, ...), each tenant's on the one its ID hashes to: a tenant's flood of converging chains fills its own queue, shared with 1 in tenant_queues of the other tenants. Changing it moves tenants between queues at their next run."
  type        = number
  default     = 8

  validation {
    condition     = var.tenant_queues >= 1 && var.tenant_queues <= 64 && floor(var.tenant_queues) == var.tenant_queues
    error_message = "tenant_queues must be a whole number from 1 to 64."
  }
}

variable "max_concurrent_dispatches" {
  description = "Reconcile runs in flight at once on each queue of changes (Cloud Tasks); tenant_queues times this in all."
  type        = number
  default     = 50
}

variable "steady_max_concurrent_dispatches" {
  description = "Steady refreshes in flight at once (Cloud Tasks queue reconcile-steady)."
  type        = number
  default     = 20
}

variable "steady_max_dispatches_per_second" {
  description = "Steady refreshes started a second at most: with steady_interval, the fleet refreshed on time (100/s: 30,000 resources every 5 minutes)."
  type        = number
  default     = 100
}

variable "converging_interval" {
  description = "Time between reconcile runs while anything converges."
  type        = string
  default     = "30s"
}

variable "steady_interval" {
  description = "Time between reconcile runs of a ready or failed cluster."
  type        = string
  default     = "5m"
}

variable "lease_ttl" {
  description = "Longest a reconcile run holds its cluster."
  type        = string
  default     = "30s"
}

variable "watchdog_grace" {
  description = "How late a run may be before the watchdog restarts its chain, and how old an outbox event must be before it drains it."
  type        = string
  default     = "1m"
}

variable "log_level" {
  description = "DEBUG, INFO, WARN or ERROR."
  type        = string
  default     = "INFO"
}

variable "deletion_protection" {
  description = "Refuse to destroy the Cloud Run services and the Firestore database."
  type        = bool
  default     = true
}

variable "alert_notification_channels" {
  description = "Cloud Monitoring notification channels (projects/P/notificationChannels/ID) the alerts notify."
  type        = list(string)
  default     = []
}

variable "watchdog_restarts_threshold" {
  description = "Reconcile chains the watchdog may restart in 15 minutes before it alerts: a few are a lost task now and then, more mean tasks are failing or lost."
  type        = number
  default     = 5
}

variable "provider_errors_threshold" {
  description = "Transient GKE errors in 10 minutes before it alerts."
  type        = number
  default     = 10
}

variable "provider_quota_per_minute" {
  description = "Each provider project's GKE request quota (requests per minute), as its quota page shows it."
  type        = number
  default     = 600
}

variable "provider_quota_share" {
  description = "The share of each provider project's GKE request quota the reconciler may spend; the rest is the project's other users'."
  type        = number
  default     = 0.8
}
