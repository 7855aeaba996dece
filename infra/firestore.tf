resource "google_firestore_database" "main" {
  name        = var.firestore_database
  location_id = var.firestore_location
  type        = "FIRESTORE_NATIVE"
  # Pessimistic concurrency: a transaction's reads are locked until commit,
  # which the store relies on for its point reads (reservations, leases).
  concurrency_mode                  = "PESSIMISTIC"
  point_in_time_recovery_enablement = "POINT_IN_TIME_RECOVERY_ENABLED"
  delete_protection_state           = var.deletion_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy                   = var.deletion_protection ? "ABANDON" : "DELETE"

  depends_on = [google_project_service.apis]
}

# TTL policies: idempotency records, deleted node pools, clusters and
# substrates, the past minutes of the GKE request budget, and the receipts
# of the API's commits (an hour, shared/store/transact.go) carry
# expireAt; Firestore deletes them some time (typically
# within a day) after it passes. Live documents have no expireAt and are
# kept. The field is exempt from indexing: a TTL timestamp is written in
# increasing order and would only make a hot-spotting index.
resource "google_firestore_field" "ttl" {
  for_each   = toset(["idempotency", "nodePools", "clusters", "substrates", "budgetShards", "receipts"])
  database   = google_firestore_database.main.name
  collection = each.value
  field      = "expireAt"

  ttl_config {}
  index_config {}
}

# The outbox drain of the watchdog reads every tenant's outbox ordered by
# time (a collection-group query).
resource "google_firestore_field" "outbox_time" {
  database   = google_firestore_database.main.name
  collection = "outbox"
  field      = "time"

  index_config {
    indexes {
      order       = "ASCENDING"
      query_scope = "COLLECTION"
    }
    indexes {
      order       = "ASCENDING"
      query_scope = "COLLECTION_GROUP"
    }
  }
}

# kubernetesNodePools.list and the reconciler: a cluster's active pools,
# oldest first.
resource "google_firestore_index" "nodepools_active_created" {
  database    = google_firestore_database.main.name
  collection  = "nodePools"
  query_scope = "COLLECTION"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "createdAt"
    order      = "ASCENDING"
  }
}

# kubernetesClusters.list: a tenant's active clusters, newest first, with
# the document name as tie-breaker for the page cursor.
resource "google_firestore_index" "clusters_active_created" {
  database    = google_firestore_database.main.name
  collection  = "clusters"
  query_scope = "COLLECTION"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "createdAt"
    order      = "DESCENDING"
  }
  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }
}

# kubernetesClusters.list filtered by pool.
resource "google_firestore_index" "clusters_active_pool_created" {
  database    = google_firestore_database.main.name
  collection  = "clusters"
  query_scope = "COLLECTION"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "spec.poolId"
    order      = "ASCENDING"
  }
  fields {
    field_path = "createdAt"
    order      = "DESCENDING"
  }
  fields {
    field_path = "__name__"
    order      = "DESCENDING"
  }
}

# The watchdog: active clusters of every tenant whose next run is overdue.
resource "google_firestore_index" "clusters_overdue" {
  database    = google_firestore_database.main.name
  collection  = "clusters"
  query_scope = "COLLECTION_GROUP"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "reconcile.nextAt"
    order      = "ASCENDING"
  }
}


# kubernetesSubstrates.list: a tenant's active substrates, oldest first.
resource "google_firestore_index" "substrates_active_created" {
  database    = google_firestore_database.main.name
  collection  = "substrates"
  query_scope = "COLLECTION"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "createdAt"
    order      = "ASCENDING"
  }
}

# kubernetesSubstrates.list filtered by pool.
resource "google_firestore_index" "substrates_active_pool_created" {
  database    = google_firestore_database.main.name
  collection  = "substrates"
  query_scope = "COLLECTION"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "poolId"
    order      = "ASCENDING"
  }
  fields {
    field_path = "createdAt"
    order      = "ASCENDING"
  }
}

# The watchdog: active substrates of every tenant whose next run is
# overdue. (A substrate's nodes are listed by document ID, which needs no
# index.)
resource "google_firestore_index" "substrates_overdue" {
  database    = google_firestore_database.main.name
  collection  = "substrates"
  query_scope = "COLLECTION_GROUP"

  fields {
    field_path = "active"
    order      = "ASCENDING"
  }
  fields {
    field_path = "reconcile.nextAt"
    order      = "ASCENDING"
  }
}
