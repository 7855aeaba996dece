package cloudtasks

import (
	"encoding/base64"
	"math"
	"net/url"
	"regexp"
	"sort"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

var (
	locationRE = regexp.MustCompile(`^projects/[A-Za-z0-9.:-]+/locations/[A-Za-z0-9-]+$`)
	queueRE    = regexp.MustCompile(`^(projects/[A-Za-z0-9.:-]+/locations/[A-Za-z0-9-]+)/queues/([A-Za-z0-9-]{1,100})$`)
	taskRE     = regexp.MustCompile(`^(projects/[A-Za-z0-9.:-]+/locations/[A-Za-z0-9-]+/queues/[A-Za-z0-9-]{1,100})/tasks/([A-Za-z0-9_-]{1,500})$`)
)

// Limits and defaults of the real service.
const (
	maxRate            = 500
	maxConcurrent      = 5000
	maxTaskSize        = 100 * 1024
	maxScheduleAhead   = 30 * 24 * time.Hour
	minDispatchTimeout = 15 * time.Second
	maxDispatchTimeout = 30 * time.Minute
	defaultDeadline    = 10 * time.Minute
	maxTaskPage        = 1000
)

func checkLocation(name string) error {
	if !locationRE.MatchString(name) {
		return status.Errorf(codes.InvalidArgument, "invalid location name %q: want projects/PROJECT/locations/LOCATION", name)
	}
	return nil
}

func checkQueueName(name string) error {
	if !queueRE.MatchString(name) {
		return status.Errorf(codes.InvalidArgument, "invalid queue name %q: want projects/PROJECT/locations/LOCATION/queues/QUEUE", name)
	}
	return nil
}

// queueID returns the last segment of a valid queue name.
func queueID(name string) string { return queueRE.FindStringSubmatch(name)[2] }

// splitTaskName returns the queue name and task ID of a task name.
func splitTaskName(name string) (queueName, id string, err error) {
	m := taskRE.FindStringSubmatch(name)
	if m == nil {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid task name %q: want projects/PROJECT/locations/LOCATION/queues/QUEUE/tasks/TASK", name)
	}
	return m[1], m[2], nil
}

// fillQueueDefaults sets the fields the real service fills in when they are
// left unset.
func fillQueueDefaults(q *cloudtaskspb.Queue) {
	if q.RateLimits == nil {
		q.RateLimits = &cloudtaskspb.RateLimits{}
	}
	rl := q.RateLimits
	if rl.MaxDispatchesPerSecond == 0 {
		rl.MaxDispatchesPerSecond = maxRate
	}
	if rl.MaxConcurrentDispatches == 0 {
		rl.MaxConcurrentDispatches = 1000
	}
	rl.MaxBurstSize = int32(min(100, math.Ceil(rl.MaxDispatchesPerSecond)))
	if q.RetryConfig == nil {
		q.RetryConfig = &cloudtaskspb.RetryConfig{}
	}
	fillRetryDefaults(q.RetryConfig)
}

func fillRetryDefaults(rc *cloudtaskspb.RetryConfig) {
	if rc.MaxAttempts == 0 {
		rc.MaxAttempts = 100
	}
	if rc.MinBackoff == nil {
		rc.MinBackoff = durationpb.New(100 * time.Millisecond)
	}
	if rc.MaxBackoff == nil {
		rc.MaxBackoff = durationpb.New(time.Hour)
	}
	if rc.MaxDoublings == 0 {
		rc.MaxDoublings = 16
	}
	if rc.MaxRetryDuration == nil {
		rc.MaxRetryDuration = durationpb.New(0)
	}
}

func checkRetryConfig(rc *cloudtaskspb.RetryConfig) error {
	if rc.MaxAttempts < -1 {
		return status.Errorf(codes.InvalidArgument, "retry_config.max_attempts %d: must be -1 or more", rc.MaxAttempts)
	}
	if rc.MaxDoublings < 0 {
		return status.Errorf(codes.InvalidArgument, "retry_config.max_doublings %d: must not be negative", rc.MaxDoublings)
	}
	for field, d := range map[string]*durationpb.Duration{
		"min_backoff": rc.MinBackoff, "max_backoff": rc.MaxBackoff, "max_retry_duration": rc.MaxRetryDuration,
	} {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			return status.Errorf(codes.InvalidArgument, "retry_config.%s %v: must be a non-negative duration", field, d)
		}
	}
	if rc.MinBackoff.AsDuration() > rc.MaxBackoff.AsDuration() {
		return status.Errorf(codes.InvalidArgument, "retry_config.min_backoff %v is above max_backoff %v", rc.MinBackoff.AsDuration(), rc.MaxBackoff.AsDuration())
	}
	return nil
}

// checkQueue validates a queue whose defaults are filled in.
func checkQueue(q *cloudtaskspb.Queue) error {
	if q.HttpTarget != nil {
		return status.Errorf(codes.Unimplemented, "queue %q: http_target is not supported by the emulator", q.Name)
	}
	rl := q.RateLimits
	if rl.MaxDispatchesPerSecond < 0 || rl.MaxDispatchesPerSecond > maxRate {
		return status.Errorf(codes.InvalidArgument, "rate_limits.max_dispatches_per_second %v: must be in (0, %d]", rl.MaxDispatchesPerSecond, maxRate)
	}
	if rl.MaxConcurrentDispatches < 0 || rl.MaxConcurrentDispatches > maxConcurrent {
		return status.Errorf(codes.InvalidArgument, "rate_limits.max_concurrent_dispatches %d: must be in (0, %d]", rl.MaxConcurrentDispatches, maxConcurrent)
	}
	return checkRetryConfig(q.RetryConfig)
}

// checkHTTPRequest validates a task's HTTP target and fills its default
// method.
func checkHTTPRequest(r *cloudtaskspb.HttpRequest) error {
	u, err := url.Parse(r.Url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return status.Errorf(codes.InvalidArgument, "http_request.url %q: must be an absolute http:// or https:// URL", r.Url)
	}
	if r.HttpMethod == cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
		r.HttpMethod = cloudtaskspb.HttpMethod_POST
	}
	if _, ok := cloudtaskspb.HttpMethod_name[int32(r.HttpMethod)]; !ok {
		return status.Errorf(codes.InvalidArgument, "http_request.http_method %d: unknown method", r.HttpMethod)
	}
	switch r.HttpMethod {
	case cloudtaskspb.HttpMethod_POST, cloudtaskspb.HttpMethod_PUT, cloudtaskspb.HttpMethod_PATCH:
	default:
		if len(r.Body) > 0 {
			return status.Errorf(codes.InvalidArgument, "http_request.body: not allowed with method %v", r.HttpMethod)
		}
	}
	switch a := r.AuthorizationHeader.(type) {
	case nil:
	case *cloudtaskspb.HttpRequest_OidcToken:
		if a.OidcToken.GetServiceAccountEmail() == "" {
			return status.Errorf(codes.InvalidArgument, "http_request.oidc_token.service_account_email is required")
		}
	default:
		return status.Errorf(codes.Unimplemented, "http_request.oauth_token is not supported by the emulator")
	}
	return nil
}

// page returns the slice of names (sorted) that a page request selects and
// the token of the next page, "" on the last one. Tokens encode the last
// name returned, so pages stay consistent while items come and go.
func page(names []string, size, maxSize int32, token string) (selected []string, next string, err error) {
	sort.Strings(names)
	if size < 0 {
		return nil, "", status.Errorf(codes.InvalidArgument, "page_size %d: must not be negative", size)
	}
	if size == 0 || size > maxSize {
		size = maxSize
	}
	start := 0
	if token != "" {
		after, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return nil, "", status.Errorf(codes.InvalidArgument, "invalid page_token %q", token)
		}
		start = sort.SearchStrings(names, string(after))
		if start < len(names) && names[start] == string(after) {
			start++
		}
	}
	end := min(start+int(size), len(names))
	selected = names[start:end]
	if end < len(names) {
		next = base64.RawURLEncoding.EncodeToString([]byte(names[end-1]))
	}
	return selected, next, nil
}

func durationOr(d *durationpb.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.AsDuration()
}
