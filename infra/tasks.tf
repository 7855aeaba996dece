locals {
  # The queues of changes' and converging chains' runs, in the order
  # TASKS_QUEUE names them and the functions hash tenants over
  # (tasks.TenantShard: FNV-1a of the tenant's ID mod their number). The
  # first keeps the name of the deployment's one queue before there were
  # several, so its tasks, grants and state stay where they are (a deleted
  # queue's name cannot be used again for days); the others are numbered
  # after it, as the devstack names them. More queues append names, and
  # tenants move to their new queue at their next run.
  change_queues = [for i in range(var.tenant_queues) : i == 0 ? "reconcile" : "reconcile-${i}"]
}

# The reconcile queues: one task per run of a cluster's chain, each
# tenant's changing chains on one of them, so that one tenant's many
# converging chains fill its own queue's rate and not everyone's.
resource "google_cloud_tasks_queue" "reconcile" {
  for_each = toset(local.change_queues)
  name     = each.value
  location = var.region

  rate_limits {
    # Bounds the runs in flight, and so the load on Firestore and the GKE
    # API; a run holds its cluster's lease for at most lease_ttl. Per
    # queue: all of them together let through tenant_queues times this.
    max_concurrent_dispatches = var.max_concurrent_dispatches
    max_dispatches_per_second = 50
  }

  retry_config {
    # A failed run (GKE or Firestore unavailable, the cluster busy) is
    # retried with backoff for an hour; after that the chain counts as
    # dead and the watchdog restarts it with a new token.
    max_attempts       = -1
    max_retry_duration = "3600s"
    min_backoff        = "1s"
    max_backoff        = "300s"
    max_doublings      = 8
  }

  stackdriver_logging_config {
    sampling_ratio = 0.1
  }

  depends_on = [google_project_service.apis]
}

# The one queue before there were several is the first of them.
moved {
  from = google_cloud_tasks_queue.reconcile
  to   = google_cloud_tasks_queue.reconcile["reconcile"]
}

# The runs of steady chains: each ready cluster's and substrate's refresh,
# every steady_interval. A queue of their own, so that however many are
# due, a tenant's change on the queue above is dispatched at once; its
# rate bounds what a fleet's refreshes cost, and when more are due than it
# lets through they stretch, and nothing else waits.
resource "google_cloud_tasks_queue" "reconcile_steady" {
  name     = "reconcile-steady"
  location = var.region

  rate_limits {
    max_concurrent_dispatches = var.steady_max_concurrent_dispatches
    max_dispatches_per_second = var.steady_max_dispatches_per_second
  }

  retry_config {
    max_attempts       = -1
    max_retry_duration = "3600s"
    min_backoff        = "1s"
    max_backoff        = "300s"
    max_doublings      = 8
  }

  stackdriver_logging_config {
    sampling_ratio = 0.01
  }

  depends_on = [google_project_service.apis]
}

# The watchdog, every minute. A missed minute needs no retry: the next one
# does the same work.
resource "google_cloud_scheduler_job" "watchdog" {
  name             = "${var.prefix}-watchdog"
  region           = var.region
  description      = "Restarts dead reconcile chains and drains the outbox"
  schedule         = "* * * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "60s"

  retry_config {
    retry_count = 0
  }

  http_target {
    http_method = "POST"
    uri         = local.watchdog_url

    oidc_token {
      service_account_email = google_service_account.scheduler.email
      audience              = local.watchdog_url
    }
  }

  depends_on = [google_project_service.apis, google_cloud_run_v2_service_iam_member.scheduler_invokes_watchdog]
}
