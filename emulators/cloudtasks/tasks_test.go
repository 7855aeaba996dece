package cloudtasks

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCreateTaskValidation(t *testing.T) {
	_, c := start(t)
	createQueue(t, c, nil)
	withReq := func(r *cloudtaskspb.HttpRequest) *cloudtaskspb.Task {
		return &cloudtaskspb.Task{MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: r}}
	}
	tests := []struct {
		name   string
		parent string
		task   *cloudtaskspb.Task
		want   codes.Code
	}{
		{"ok", testQueue, httpTask("", "http://example.test/x"), codes.OK},
		{"missing queue", testLocation + "/queues/nope", httpTask("", "http://example.test/x"), codes.NotFound},
		{"bad parent", "queues/q1", httpTask("", "http://example.test/x"), codes.InvalidArgument},
		{"no task", testQueue, nil, codes.InvalidArgument},
		{"no target", testQueue, &cloudtaskspb.Task{}, codes.InvalidArgument},
		{"relative url", testQueue, httpTask("", "/x"), codes.InvalidArgument},
		{"ftp url", testQueue, httpTask("", "ftp://example.test/x"), codes.InvalidArgument},
		{"name in other queue", testQueue, httpTask(testLocation+"/queues/q2/tasks/a", "http://example.test/x"), codes.InvalidArgument},
		{"bad task id", testQueue, httpTask(testQueue+"/tasks/a.b", "http://example.test/x"), codes.InvalidArgument},
		{"body with GET", testQueue, withReq(&cloudtaskspb.HttpRequest{
			Url: "http://example.test/x", HttpMethod: cloudtaskspb.HttpMethod_GET, Body: []byte("x"),
		}), codes.InvalidArgument},
		{"oidc without account", testQueue, withReq(&cloudtaskspb.HttpRequest{
			Url: "http://example.test/x", AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{OidcToken: &cloudtaskspb.OidcToken{}},
		}), codes.InvalidArgument},
		{"oauth", testQueue, withReq(&cloudtaskspb.HttpRequest{
			Url: "http://example.test/x", AuthorizationHeader: &cloudtaskspb.HttpRequest_OauthToken{OauthToken: &cloudtaskspb.OAuthToken{ServiceAccountEmail: "a@b"}},
		}), codes.Unimplemented},
		{"too large", testQueue, withReq(&cloudtaskspb.HttpRequest{
			Url: "http://example.test/x", Body: make([]byte, 101*1024),
		}), codes.InvalidArgument},
		{"schedule too far", testQueue, &cloudtaskspb.Task{
			MessageType:  &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://example.test/x"}},
			ScheduleTime: timestamppb.New(time.Now().Add(31 * 24 * time.Hour)),
		}, codes.InvalidArgument},
		{"deadline too long", testQueue, &cloudtaskspb.Task{
			MessageType:      &cloudtaskspb.Task_HttpRequest{HttpRequest: &cloudtaskspb.HttpRequest{Url: "http://example.test/x"}},
			DispatchDeadline: durationpb.New(31 * time.Minute),
		}, codes.InvalidArgument},
		{"app engine", testQueue, &cloudtaskspb.Task{
			MessageType: &cloudtaskspb.Task_AppEngineHttpRequest{AppEngineHttpRequest: &cloudtaskspb.AppEngineHttpRequest{RelativeUri: "/x"}},
		}, codes.Unimplemented},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Scheduled far ahead so nothing is dispatched to example.test.
			if tt.task != nil && tt.task.ScheduleTime == nil {
				tt.task.ScheduleTime = timestamppb.New(time.Now().Add(time.Hour))
			}
			_, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: tt.parent, Task: tt.task})
			if code(err) != tt.want {
				t.Errorf("CreateTask(%s) = %v, want %v", tt.name, err, tt.want)
			}
		})
	}
}

func TestTaskLifecycle(t *testing.T) {
	clock := newFakeClock()
	srv, c := start(t, WithClock(clock), WithTombstone(time.Hour))
	createQueue(t, c, nil)
	later := timestamppb.New(clock.Now().Add(time.Hour))
	named := httpTask(testQueue+"/tasks/t1", "http://example.test/x")
	named.ScheduleTime = later
	named.GetHttpRequest().Body = []byte("payload")

	got := createTask(t, c, named)
	if got.Name != named.Name || !got.ScheduleTime.AsTime().Equal(later.AsTime()) {
		t.Errorf("CreateTask = %v, want name %q at %v", got, named.Name, later.AsTime())
	}
	if m := got.GetHttpRequest().HttpMethod; m != cloudtaskspb.HttpMethod_POST {
		t.Errorf("CreateTask method = %v, want POST by default", m)
	}
	if got.View != cloudtaskspb.Task_BASIC {
		t.Errorf("CreateTask view = %v, want BASIC", got.View)
	}

	unnamed := httpTask("", "http://example.test/y")
	unnamed.ScheduleTime = later
	gen := createTask(t, c, unnamed)
	if _, id, err := splitTaskName(gen.Name); err != nil || gen.Name != testQueue+"/tasks/"+id {
		t.Errorf("generated name %q: want %s/tasks/ID (%v)", gen.Name, testQueue, err)
	}

	if _, err := c.CreateTask(ctx(t), &cloudtaskspb.CreateTaskRequest{Parent: testQueue, Task: named}); code(err) != codes.AlreadyExists {
		t.Errorf("CreateTask(duplicate) = %v, want AlreadyExists", err)
	}
	if g, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: named.Name, ResponseView: cloudtaskspb.Task_FULL}); err != nil || string(g.GetHttpRequest().Body) != "payload" || g.View != cloudtaskspb.Task_FULL {
		t.Errorf("GetTask(%q) = %v, %v, want the task with its body", named.Name, g, err)
	}
	if _, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: testQueue + "/tasks/none"}); code(err) != codes.NotFound {
		t.Errorf("GetTask(missing) = %v, want NotFound", err)
	}

	var listed []string
	it := c.ListTasks(ctx(t), &cloudtaskspb.ListTasksRequest{Parent: testQueue, PageSize: 1})
	for {
		task, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			t.Fatalf("ListTasks: %v", err)
		}
		listed = append(listed, task.Name)
	}
	if len(listed) != 2 {
		t.Errorf("ListTasks = %v, want 2 tasks", listed)
	}
	if got := srv.Tasks(testQueue); len(got) != 2 {
		t.Errorf("Tasks(%q) = %d tasks, want 2", testQueue, len(got))
	}

}

func TestDispatch(t *testing.T) {
	type mint struct{ audience, account string }
	tests := []struct {
		name     string
		req      func(url string) *cloudtaskspb.HttpRequest
		wantAuth string
		wantMint *mint
	}{
		{
			name: "headers and body",
			req: func(url string) *cloudtaskspb.HttpRequest {
				return &cloudtaskspb.HttpRequest{
					Url: url, HttpMethod: cloudtaskspb.HttpMethod_PUT, Body: []byte(`{"a":1}`),
					Headers: map[string]string{"Content-Type": "application/json", "X-Custom": "v", "User-Agent": "ignored", "X-CloudTasks-TaskName": "spoofed"},
				}
			},
		},
		{
			name: "oidc with audience",
			req: func(url string) *cloudtaskspb.HttpRequest {
				return &cloudtaskspb.HttpRequest{Url: url, AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{
					OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "sa@p1.iam.gserviceaccount.com", Audience: "https://aud.test"},
				}}
			},
			wantAuth: "Bearer token-for-https://aud.test",
			wantMint: &mint{"https://aud.test", "sa@p1.iam.gserviceaccount.com"},
		},
		{
			name: "oidc audience defaults to url",
			req: func(url string) *cloudtaskspb.HttpRequest {
				return &cloudtaskspb.HttpRequest{Url: url, AuthorizationHeader: &cloudtaskspb.HttpRequest_OidcToken{
					OidcToken: &cloudtaskspb.OidcToken{ServiceAccountEmail: "sa@p1.iam.gserviceaccount.com"},
				}}
			},
			wantAuth: "Bearer token-for-URL",
			wantMint: &mint{"URL", "sa@p1.iam.gserviceaccount.com"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var minted []mint
			srv, c := start(t, WithTokenSource(func(_ context.Context, audience, account string) (string, error) {
				minted = append(minted, mint{audience, account})
				return "token-for-" + audience, nil
			}))
			createQueue(t, c, nil)
			rec := newRecorder(t)
			req := tt.req(rec.URL())
			task := createTask(t, c, &cloudtaskspb.Task{Name: testQueue + "/tasks/t1", MessageType: &cloudtaskspb.Task_HttpRequest{HttpRequest: req}})
			waitIdle(t, srv)

			got := rec.Requests()
			if len(got) != 1 {
				t.Fatalf("requests = %d, want 1", len(got))
			}
			r := got[0]
			wantMethod := req.HttpMethod.String()
			if req.HttpMethod == cloudtaskspb.HttpMethod_HTTP_METHOD_UNSPECIFIED {
				wantMethod = http.MethodPost
			}
			if r.Method != wantMethod || r.Body != string(req.Body) {
				t.Errorf("request = %s %q, want %s %q", r.Method, r.Body, wantMethod, req.Body)
			}
			wantHeaders := map[string]string{
				HeaderQueueName:      "q1",
				HeaderTaskName:       "t1",
				HeaderRetryCount:     "0",
				HeaderExecutionCount: "0",
				HeaderETA:            strconv.FormatFloat(float64(task.ScheduleTime.AsTime().UnixMicro())/1e6, 'f', 6, 64),
				"User-Agent":         "Google-Cloud-Tasks",
			}
			for k, v := range req.Headers {
				if !reservedHeader(k) {
					wantHeaders[k] = v
				}
			}
			for k, want := range wantHeaders {
				if got := r.Header.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if got := r.Header.Get(HeaderPreviousResponse); got != "" {
				t.Errorf("header %s = %q on a first attempt, want none", HeaderPreviousResponse, got)
			}
			wantAuth := strings.ReplaceAll(tt.wantAuth, "URL", rec.URL())
			if got := r.Header.Get("Authorization"); got != wantAuth {
				t.Errorf("Authorization = %q, want %q", got, wantAuth)
			}
			if tt.wantMint != nil {
				want := mint{strings.ReplaceAll(tt.wantMint.audience, "URL", rec.URL()), tt.wantMint.account}
				if len(minted) != 1 || minted[0] != want {
					t.Errorf("token source calls = %v, want [%v]", minted, want)
				}
			}
			if _, err := c.GetTask(ctx(t), &cloudtaskspb.GetTaskRequest{Name: task.Name}); code(err) != codes.NotFound {
				t.Errorf("GetTask(completed) = %v, want NotFound", err)
			}
			if s := srv.Stats(); s != (Stats{Dispatched: 1, Succeeded: 1}) {
				t.Errorf("Stats = %+v, want one dispatched and succeeded", s)
			}
		})
	}
}
