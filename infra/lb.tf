# The public HTTPS entry: a global external Application Load Balancer whose
# URL map sends POST /api/compute/{resource}/{method} to that method's
# Cloud Run service through a serverless NEG. The default route goes to
# one of the functions, which answers 404 NOT_FOUND for any path but its
# own: a request for an unknown method never reaches another method.

resource "google_compute_global_address" "api" {
  name       = "${var.prefix}-api"
  depends_on = [google_project_service.apis]
}

resource "google_compute_region_network_endpoint_group" "api" {
  for_each              = local.api_functions
  name                  = each.value.service
  region                = var.region
  network_endpoint_type = "SERVERLESS"

  cloud_run {
    service = google_cloud_run_v2_service.api[each.key].name
  }
}

resource "google_compute_backend_service" "api" {
  for_each              = local.api_functions
  name                  = each.value.service
  protocol              = "HTTPS"
  load_balancing_scheme = "EXTERNAL_MANAGED"

  backend {
    group = google_compute_region_network_endpoint_group.api[each.key].id
  }

  log_config {
    enable      = true
    sample_rate = 1.0
  }
}

resource "google_compute_url_map" "api" {
  name            = "${var.prefix}-api"
  default_service = google_compute_backend_service.api["kubernetesClusters-get"].id

  host_rule {
    hosts        = [var.domain]
    path_matcher = "api"
  }

  path_matcher {
    name            = "api"
    default_service = google_compute_backend_service.api["kubernetesClusters-get"].id

    dynamic "path_rule" {
      for_each = local.api_functions
      content {
        paths   = [path_rule.value.path]
        service = google_compute_backend_service.api[path_rule.key].id
      }
    }
  }
}

resource "google_compute_managed_ssl_certificate" "api" {
  name = "${var.prefix}-api"

  managed {
    domains = [var.domain]
  }
}

resource "google_compute_target_https_proxy" "api" {
  name             = "${var.prefix}-api"
  url_map          = google_compute_url_map.api.id
  ssl_certificates = [google_compute_managed_ssl_certificate.api.id]
}

resource "google_compute_global_forwarding_rule" "https" {
  name                  = "${var.prefix}-api-https"
  ip_address            = google_compute_global_address.api.id
  port_range            = "443"
  target                = google_compute_target_https_proxy.api.id
  load_balancing_scheme = "EXTERNAL_MANAGED"
}

# Plain HTTP only redirects to HTTPS: tokens never travel in the clear.
resource "google_compute_url_map" "redirect" {
  name = "${var.prefix}-api-redirect"

  default_url_redirect {
    https_redirect         = true
    redirect_response_code = "PERMANENT_REDIRECT"
    strip_query            = false
  }
}

resource "google_compute_target_http_proxy" "redirect" {
  name    = "${var.prefix}-api-redirect"
  url_map = google_compute_url_map.redirect.id
}

resource "google_compute_global_forwarding_rule" "http" {
  name                  = "${var.prefix}-api-http"
  ip_address            = google_compute_global_address.api.id
  port_range            = "80"
  target                = google_compute_target_http_proxy.redirect.id
  load_balancing_scheme = "EXTERNAL_MANAGED"
}
