locals {
  # The environment every function reads (functions/cloudrun.LoadConfig).
  common_env = {
    GOOGLE_CLOUD_PROJECT  = var.project
    FIRESTORE_DATABASE    = google_firestore_database.main.name
    TASKS_QUEUE           = join(",", [for q in local.change_queues : google_cloud_tasks_queue.reconcile[q].id])
    TASKS_STEADY_QUEUE    = google_cloud_tasks_queue.reconcile_steady.id
    RECONCILE_URL         = local.reconcile_url
    TASKS_SERVICE_ACCOUNT = google_service_account.tasks.email
    TASKS_AUDIENCE        = local.reconcile_url
    CONVERGING_INTERVAL   = var.converging_interval
    STEADY_INTERVAL       = var.steady_interval
    LEASE_TTL             = var.lease_ttl
    WATCHDOG_GRACE        = var.watchdog_grace
    LOG_LEVEL             = var.log_level
  }
}

resource "google_cloud_run_v2_service" "api" {
  for_each            = local.api_functions
  name                = each.value.service
  location            = var.region
  deletion_protection = var.deletion_protection
  # Reached only through the HTTPS load balancer.
  ingress = "INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER"

  template {
    service_account                  = local.runtime[each.value.account]
    timeout                          = "30s"
    max_instance_request_concurrency = 80

    scaling {
      min_instance_count = 0
      max_instance_count = var.api_max_instances
    }

    containers {
      image = var.image

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        # CPU stays allocated between requests: the outbox relay publishes
        # a call's events after its response has gone.
        cpu_idle          = false
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, {
          FUNCTION_TARGET = each.key
          AUTH_ISSUER_URL = var.auth_issuer_url
          AUTH_AUDIENCE   = var.auth_audience
        })
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_cloud_run_v2_service" "reconcile" {
  name                = local.reconcile_service
  location            = var.region
  deletion_protection = var.deletion_protection
  # Cloud Tasks is an internal source.
  ingress = "INGRESS_TRAFFIC_INTERNAL_ONLY"

  template {
    service_account = google_service_account.reconciler.email
    # A cluster's run makes at most one GKE call, a substrate's a few
    # Kubernetes API calls (30 s each at most); the lease bounds a run
    # well below this.
    timeout                          = "120s"
    max_instance_request_concurrency = 20

    scaling {
      min_instance_count = 0
      max_instance_count = var.reconcile_max_instances
    }

    containers {
      image = var.image

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        # A run publishes its events before it answers: no work after the
        # response, so CPU is only needed during requests.
        cpu_idle          = true
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, {
          FUNCTION_TARGET      = "reconcile"
          RECONCILE_AUDIENCE   = local.reconcile_url
          NODE_SERVICE_ACCOUNT = google_service_account.nodes.email
          # What the pool substrates put in their clusters: bcd's image,
          # and the join method's public URL, which bcd calls.
          BCD_IMAGE          = var.bcd_image
          SUBSTRATE_JOIN_URL = local.join_url
          # Named in what a tenant's own project must grant (infra/tenant).
          RECONCILER_SERVICE_ACCOUNT = google_service_account.reconciler.email
          # Each instance spends its share of every provider project's
          # request quota: the quota times the share, over the instances.
          PROVIDER_QUOTA_PER_MINUTE = "${var.provider_quota_per_minute}"
          PROVIDER_QUOTA_SHARE      = "${var.provider_quota_share}"
          RECONCILE_MAX_INSTANCES   = "${var.reconcile_max_instances}"
        })
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_cloud_run_v2_service" "watchdog" {
  name                = local.watchdog_service
  location            = var.region
  deletion_protection = var.deletion_protection
  # Cloud Scheduler is an internal source.
  ingress = "INGRESS_TRAFFIC_INTERNAL_ONLY"

  template {
    service_account                  = google_service_account.watchdog.email
    timeout                          = "60s"
    max_instance_request_concurrency = 1

    scaling {
      min_instance_count = 0
      max_instance_count = 1
    }

    containers {
      image = var.image

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        cpu_idle = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, {
          FUNCTION_TARGET    = "watchdog"
          RECONCILE_AUDIENCE = local.watchdog_url
          # The one caller the watchdog accepts: the job's OIDC tokens
          # (tasks.tf).
          SCHEDULER_SERVICE_ACCOUNT = google_service_account.scheduler.email
        })
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  depends_on = [google_project_service.apis]
}

# kubernetesSubstrates-poolEvents, the CloudEvent function that records the
# substrates the pools module's events ask for. Only the push subscriptions
# of pubsub.tf call it, with OIDC tokens of their own account.
resource "google_cloud_run_v2_service" "pool_events" {
  name                = local.pool_events_service
  location            = var.region
  deletion_protection = var.deletion_protection
  # Pub/Sub pushing from this project's subscriptions is an internal source.
  ingress = "INGRESS_TRAFFIC_INTERNAL_ONLY"

  template {
    service_account = google_service_account.pool_events.email
    # An event is one Firestore transaction and a kick; the subscriptions'
    # ack deadline is the same.
    timeout                          = "60s"
    max_instance_request_concurrency = 20

    scaling {
      min_instance_count = 0
      max_instance_count = 5
    }

    containers {
      image = var.image

      resources {
        limits = {
          cpu    = "1"
          memory = "512Mi"
        }
        # The event is recorded and its chain kicked before the answer:
        # nothing runs after it.
        cpu_idle          = true
        startup_cpu_boost = true
      }

      dynamic "env" {
        for_each = merge(local.common_env, {
          FUNCTION_TARGET = "kubernetesSubstrates-poolEvents"
          # The one caller the function accepts: the push subscriptions'
          # OIDC tokens (pubsub.tf), their account and audience.
          PUSH_SERVICE_ACCOUNT = google_service_account.pool_events_push.email
          PUSH_AUDIENCE        = local.pool_events_url
        })
        content {
          name  = env.key
          value = env.value
        }
      }
    }
  }

  depends_on = [google_project_service.apis]
}
