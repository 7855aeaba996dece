package gke

import (
	"regexp"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// quota is GKE's per-project request quota ("Requests per minute"): every
// call names a project (in its name or parent), and a project's calls past
// its quota in a clock minute are refused with RESOURCE_EXHAUSTED. Usage is
// kept per project and minute for reports. Must be used with the lock held.
type quota struct {
	perMinute int            // every project's quota (0: none)
	projects  map[string]int // per project, overriding perMinute
	usage     map[string]map[time.Time]*MinuteUsage
}

// MinuteUsage is one project's calls in one clock minute.
type MinuteUsage struct {
	Start    time.Time // the minute
	Calls    int       // calls served (not refused for quota)
	Refused  int       // calls refused for quota
	Quota    int       // the quota then (0: none)
	Exceeded bool      // more calls were made than the quota allows
}

// admit counts a call of project at now, and refuses it when the project
// has used its quota of the minute.
func (q *quota) admit(project string, now time.Time) error {
	if project == "" {
		return nil
	}
	minute := now.Truncate(time.Minute)
	byMinute := q.usage[project]
	if byMinute == nil {
		byMinute = map[time.Time]*MinuteUsage{}
		q.usage[project] = byMinute
	}
	u := byMinute[minute]
	if u == nil {
		u = &MinuteUsage{Start: minute}
		byMinute[minute] = u
	}
	limit := q.perMinute
	if l, ok := q.projects[project]; ok {
		limit = l
	}
	u.Quota = limit
	if limit > 0 && u.Calls >= limit {
		u.Refused++
		u.Exceeded = true
		return status.Errorf(codes.ResourceExhausted, "Quota exceeded for quota metric 'Requests' and limit 'Requests per minute' of service 'container.googleapis.com' for consumer 'project:%s'.", project)
	}
	u.Calls++
	return nil
}

var projectRE = regexp.MustCompile(`(?:^|/)projects/([^/]+)`)

// projectOf is the project a request names (its name or parent), or "".
func projectOf(req any) string {
	var name string
	switch r := req.(type) {
	case interface{ GetName() string }:
		name = r.GetName()
	}
	if name == "" {
		if r, ok := req.(interface{ GetParent() string }); ok {
			name = r.GetParent()
		}
	}
	if m := projectRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	if r, ok := req.(interface{ GetProjectId() string }); ok {
		return r.GetProjectId()
	}
	return ""
}

// SetRequestQuota sets project's request quota: calls per minute, 0 for
// none (WithRequestQuota sets every project's).
func (s *Server) SetRequestQuota(project string, perMinute int) {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	g.quota.projects[project] = perMinute
}

// Usage returns project's calls per clock minute, oldest first: what GKE's
// quota page shows.
func (s *Server) Usage(project string) []MinuteUsage {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]MinuteUsage, 0, len(g.quota.usage[project]))
	for _, u := range g.quota.usage[project] {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Projects returns the projects that made calls, sorted.
func (s *Server) Projects() []string {
	g := s.GServer
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.quota.usage))
	for p := range g.quota.usage {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
