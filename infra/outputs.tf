output "api_ip" {
  description = "Address of the HTTPS load balancer; point the domain's A record at it."
  value       = google_compute_global_address.api.address
}

output "api_url" {
  description = "Base URL of the API."
  value       = local.api_url
}

output "reconcile_url" {
  description = "URL of the reconcile function (Cloud Tasks' target)."
  value       = google_cloud_run_v2_service.reconcile.uri
}

output "watchdog_url" {
  description = "URL of the watchdog function (Cloud Scheduler's target)."
  value       = google_cloud_run_v2_service.watchdog.uri
}

output "tasks_queues" {
  description = "The reconcile queues of changes and converging chains, in TASKS_QUEUE's order (each tenant's on the one its ID hashes to), and the steady chains' queue."
  value = {
    changes = [for q in local.change_queues : google_cloud_tasks_queue.reconcile[q].id]
    steady  = google_cloud_tasks_queue.reconcile_steady.id
  }
}

output "service_accounts" {
  description = "Runtime and caller identities."
  value = {
    api              = google_service_account.api.email
    join             = google_service_account.join.email
    reconciler       = google_service_account.reconciler.email
    watchdog         = google_service_account.watchdog.email
    pool_events      = google_service_account.pool_events.email
    tasks            = google_service_account.tasks.email
    scheduler        = google_service_account.scheduler.email
    pool_events_push = google_service_account.pool_events_push.email
    nodes            = google_service_account.nodes.email
  }
}

output "topics" {
  description = "Event topics, one per event type."
  value       = [for t in google_pubsub_topic.events : t.id]
}

output "pool_events_subscriptions" {
  description = "The push subscriptions of the pools module's topics, and the one keeping their dead letters."
  value = {
    push        = [for s in google_pubsub_subscription.pool_events : s.id]
    dead_letter = google_pubsub_subscription.pool_events_dead_letter.id
  }
}

output "dashboard" {
  description = "The operations dashboard."
  value       = google_monitoring_dashboard.operations.id
}
