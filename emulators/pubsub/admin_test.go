package pubsub_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	iampb "cloud.google.com/go/iam/apiv1/iampb"
	pubsubapi "cloud.google.com/go/pubsub/v2/apiv1"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/option"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
)

// wantCode checks that err has the status code want and, if msg is not
// empty, that its message contains msg.
func wantCode(t *testing.T, what string, err error, want codes.Code, msg string) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: code %v (%v), want %v", what, got, err, want)
		return
	}
	if msg != "" && !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("%s: message %q, want it to contain %q", what, status.Convert(err).Message(), msg)
	}
}

func TestCreateTopic(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		want codes.Code
	}{
		{"projects/p/topics/good-name_1.~%+", codes.OK},
		{"projects/p/topics/events", codes.AlreadyExists},
		{"projects/p/topics/ab", codes.InvalidArgument},
		{"projects/p/topics/1abc", codes.InvalidArgument},
		{"projects/p/topics/googthing", codes.InvalidArgument},
		{"projects/p/topics/has space", codes.InvalidArgument},
		{"projects/p/topics/" + strings.Repeat("a", 256), codes.InvalidArgument},
		{"projects/p/subscriptions/abc", codes.InvalidArgument},
	} {
		_, err := c.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: tt.name})
		msg := ""
		if tt.want == codes.InvalidArgument {
			msg = "Invalid resource name given"
		}
		wantCode(t, tt.name, err, tt.want, msg)
	}
	_, err := c.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: "projects/p/topics/retained", MessageRetentionDuration: durationpb.New(time.Minute)})
	wantCode(t, "retention of a minute", err, codes.InvalidArgument, "")
}

func TestUpdateTopic(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	got, err := c.TopicAdminClient.UpdateTopic(ctx, &pb.UpdateTopicRequest{
		Topic:      &pb.Topic{Name: topic, Labels: map[string]string{"a": "1"}, KmsKeyName: "ignored"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels", "message_storage_policy"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["a"] != "1" || got.KmsKeyName != "" {
		t.Errorf("updated topic = %v, want the labels and nothing outside the mask", got)
	}
	for _, tt := range []struct {
		mask []string
		want codes.Code
	}{{nil, codes.InvalidArgument}, {[]string{"name"}, codes.InvalidArgument}, {[]string{"labels"}, codes.OK}} {
		_, err := c.TopicAdminClient.UpdateTopic(ctx, &pb.UpdateTopicRequest{Topic: &pb.Topic{Name: topic}, UpdateMask: &fieldmaskpb.FieldMask{Paths: tt.mask}})
		wantCode(t, strings.Join(tt.mask, ","), err, tt.want, "")
	}
	_, err = c.TopicAdminClient.UpdateTopic(ctx, &pb.UpdateTopicRequest{Topic: &pb.Topic{Name: "projects/p/topics/missing"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels"}}})
	wantCode(t, "missing topic", err, codes.NotFound, "Resource not found")
}

func TestDeleteTopic(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	sub := subscribe(t, c, "orphan", false)
	if err := c.TopicAdminClient.DeleteTopic(ctx, &pb.DeleteTopicRequest{Topic: topic}); err != nil {
		t.Fatal(err)
	}
	got, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: sub})
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != "_deleted-topic_" {
		t.Errorf("topic of a deleted topic's subscription = %q, want _deleted-topic_", got.Topic)
	}
	_, err = c.TopicAdminClient.GetTopic(ctx, &pb.GetTopicRequest{Topic: topic})
	wantCode(t, "get deleted topic", err, codes.NotFound, "")
}

func TestPublishLimits(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	many := make([]*pb.PubsubMessage, 1001)
	for i := range many {
		many[i] = &pb.PubsubMessage{Data: []byte("x")}
	}
	for _, tt := range []struct {
		name string
		msgs []*pb.PubsubMessage
		want codes.Code
		msg  string
	}{
		{"9 MB", []*pb.PubsubMessage{{Data: make([]byte, 9_000_000)}}, codes.OK, ""},
		{"over 10 MiB", []*pb.PubsubMessage{{Data: make([]byte, 6<<20)}, {Data: make([]byte, 5<<20)}}, codes.InvalidArgument, "Request payload size exceeds the limit: 10485760 bytes."},
		{"1001 messages", many, codes.InvalidArgument, "maximum value is 1000"},
		{"empty", []*pb.PubsubMessage{{}}, codes.InvalidArgument, "Each message must contain either non-empty data, or at least one attribute."},
		{"attributes only", []*pb.PubsubMessage{{Attributes: map[string]string{"k": "v"}}}, codes.OK, ""},
		{"long key", []*pb.PubsubMessage{{Attributes: map[string]string{strings.Repeat("k", 257): "v"}}}, codes.InvalidArgument, ""},
		{"long value", []*pb.PubsubMessage{{Attributes: map[string]string{"k": strings.Repeat("v", 1025)}}}, codes.InvalidArgument, ""},
	} {
		resp, err := c.TopicAdminClient.Publish(ctx, &pb.PublishRequest{Topic: topic, Messages: tt.msgs})
		wantCode(t, tt.name, err, tt.want, tt.msg)
		for _, id := range resp.GetMessageIds() {
			if strings.Trim(id, "0123456789") != "" {
				t.Errorf("%s: message ID %q is not decimal", tt.name, id)
			}
		}
	}
}

func TestSubscriptionSettings(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		sub  *pb.Subscription
		want codes.Code
	}{
		{"defaults", &pb.Subscription{Topic: topic}, codes.OK},
		{"deadline 9", &pb.Subscription{Topic: topic, AckDeadlineSeconds: 9}, codes.InvalidArgument},
		{"deadline 601", &pb.Subscription{Topic: topic, AckDeadlineSeconds: 601}, codes.InvalidArgument},
		{"bad filter", &pb.Subscription{Topic: topic, Filter: `attributes.k = `}, codes.InvalidArgument},
		{"mixed filter", &pb.Subscription{Topic: topic, Filter: `attributes:a AND attributes:b OR attributes:c`}, codes.InvalidArgument},
		{"missing topic", &pb.Subscription{Topic: "projects/p/topics/missing"}, codes.NotFound},
	} {
		tt.sub.Name = "projects/p/subscriptions/settings-" + strings.ReplaceAll(tt.name, " ", "-")
		got, err := c.SubscriptionAdminClient.CreateSubscription(ctx, tt.sub)
		wantCode(t, tt.name, err, tt.want, "")
		if err == nil && (got.AckDeadlineSeconds != 10 || got.MessageRetentionDuration.AsDuration() != 7*24*time.Hour) {
			t.Errorf("%s: ack deadline %d, retention %v, want Pub/Sub's defaults 10 s and 7 days", tt.name, got.AckDeadlineSeconds, got.MessageRetentionDuration.AsDuration())
		}
	}
	sub := subscribe(t, c, "update", false)
	got, err := c.SubscriptionAdminClient.UpdateSubscription(ctx, &pb.UpdateSubscriptionRequest{
		Subscription: &pb.Subscription{Name: sub, MessageRetentionDuration: durationpb.New(72 * time.Hour), AckDeadlineSeconds: 30},
		UpdateMask:   &fieldmaskpb.FieldMask{Paths: []string{"message_retention_duration"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageRetentionDuration.AsDuration() != 72*time.Hour || got.AckDeadlineSeconds != 10 {
		t.Errorf("updated subscription = %v, want the retention changed and nothing else", got)
	}
}

func TestFilter(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	for i, tt := range []struct {
		filter string
		want   []string // data of the messages delivered
	}{
		{`attributes.k = "a"`, []string{"a"}},
		{`attributes.k != "a"`, []string{"ab", "none"}},
		{`attributes:k`, []string{"a", "ab"}},
		{`NOT attributes:k`, []string{"none"}},
		{`hasPrefix(attributes.k, "a") AND attributes.x = "1"`, []string{"ab"}},
		{`(attributes.k = "a" OR attributes.x = "1") AND attributes:k`, []string{"a", "ab"}},
	} {
		name := "projects/p/subscriptions/filter-" + strconv.Itoa(i)
		if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pb.Subscription{Name: name, Topic: topic, Filter: tt.filter}); err != nil {
			t.Fatalf("%s: %v", tt.filter, err)
		}
		srv.PublishMessage(topic, []byte("a"), map[string]string{"k": "a"})
		srv.PublishMessage(topic, []byte("ab"), map[string]string{"k": "ab", "x": "1"})
		srv.PublishMessage(topic, []byte("none"), map[string]string{"y": "1"})
		var got []string
		resp, err := c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: name, MaxMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range resp.ReceivedMessages {
			got = append(got, string(m.Message.Data))
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("filter %s delivered %v, want %v", tt.filter, got, tt.want)
		}
	}
}

func TestDetach(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	sub := subscribe(t, c, "detach", false)
	srv.PublishMessage(topic, []byte("x"), nil)
	if _, err := c.TopicAdminClient.DetachSubscription(ctx, &pb.DetachSubscriptionRequest{Subscription: sub}); err != nil {
		t.Fatal(err)
	}
	got, err := c.SubscriptionAdminClient.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: sub})
	if err != nil || !got.Detached {
		t.Fatalf("detached subscription = %v, %v; want detached", got, err)
	}
	_, err = c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: sub, MaxMessages: 1, ReturnImmediately: true})
	wantCode(t, "pull of a detached subscription", err, codes.FailedPrecondition, "")
}

func TestExactlyOnceAck(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	sub := "projects/p/subscriptions/exact"
	if _, err := c.SubscriptionAdminClient.CreateSubscription(ctx, &pb.Subscription{Name: sub, Topic: topic, EnableExactlyOnceDelivery: true}); err != nil {
		t.Fatal(err)
	}
	srv.PublishMessage(topic, []byte("x"), nil)
	resp, err := c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: sub, MaxMessages: 1})
	if err != nil || len(resp.ReceivedMessages) != 1 {
		t.Fatalf("pull = %v, %v", resp, err)
	}
	id := resp.ReceivedMessages[0].AckId
	if err := c.SubscriptionAdminClient.Acknowledge(ctx, &pb.AcknowledgeRequest{Subscription: sub, AckIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	err = c.SubscriptionAdminClient.ModifyAckDeadline(ctx, &pb.ModifyAckDeadlineRequest{Subscription: sub, AckIds: []string{id, "1-999"}, AckDeadlineSeconds: 30})
	var info *errdetails.ErrorInfo
	for _, d := range status.Convert(err).Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.Reason != "EXACTLY_ONCE_ACKID_FAILURE" || info.Metadata[id] != "PERMANENT_FAILURE_INVALID_ACK_ID" {
		t.Errorf("modack of an acknowledged message with exactly once = %v (%v), want its ack ID a permanent failure", err, info)
	}
}

func TestSchemas(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	sc, err := pubsubapi.NewSchemaClient(ctx, option.WithEndpoint(srv.Addr), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	def := `{"type":"record","name":"R","fields":[{"name":"n","type":"string"},{"name":"m","type":["null","int"],"default":null}]}`
	created, err := sc.CreateSchema(ctx, &pb.CreateSchemaRequest{Parent: "projects/p", SchemaId: "rec", Schema: &pb.Schema{Type: pb.Schema_AVRO, Definition: def}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		view    pb.SchemaView
		wantDef bool
	}{{pb.SchemaView_BASIC, false}, {pb.SchemaView_FULL, true}, {pb.SchemaView_SCHEMA_VIEW_UNSPECIFIED, true}} {
		got, err := sc.GetSchema(ctx, &pb.GetSchemaRequest{Name: created.Name, View: tt.view})
		if err != nil {
			t.Fatal(err)
		}
		if (got.Definition != "") != tt.wantDef {
			t.Errorf("get with view %v: definition %q, want it present: %v", tt.view, got.Definition, tt.wantDef)
		}
	}
	it := sc.ListSchemas(ctx, &pb.ListSchemasRequest{Parent: "projects/p"})
	if got, err := it.Next(); err != nil || got.Definition != "" {
		t.Errorf("list's default view gave %v, %v; want BASIC, no definition", got, err)
	}
	for _, tt := range []struct {
		name string
		def  string
		typ  pb.Schema_Type
		want codes.Code
	}{
		{"avro", def, pb.Schema_AVRO, codes.OK},
		{"not avro", `{"not_actually":"avro"}`, pb.Schema_AVRO, codes.InvalidArgument},
		{"not json", `woohoo`, pb.Schema_AVRO, codes.InvalidArgument},
		{"proto", "syntax = \"proto3\";\nmessage M {\n  string a = 1;\n}\n", pb.Schema_PROTOCOL_BUFFER, codes.OK},
		{"two protos", "message A {}\nmessage B {}\n", pb.Schema_PROTOCOL_BUFFER, codes.InvalidArgument},
	} {
		_, err := sc.ValidateSchema(ctx, &pb.ValidateSchemaRequest{Parent: "projects/p", Schema: &pb.Schema{Type: tt.typ, Definition: tt.def}})
		wantCode(t, "validate "+tt.name, err, tt.want, "")
	}
	// A topic bound to a schema is refused: nothing checks what is
	// published against it.
	_, err = c.TopicAdminClient.CreateTopic(ctx, &pb.Topic{Name: "projects/p/topics/bound", SchemaSettings: &pb.SchemaSettings{Schema: created.Name, Encoding: pb.Encoding_JSON}})
	wantCode(t, "a topic bound to a schema", err, codes.Unimplemented, "")
	if err := sc.DeleteSchema(ctx, &pb.DeleteSchemaRequest{Name: created.Name}); err != nil {
		t.Fatalf("DeleteSchema: %v", err)
	}
	if _, err := sc.GetSchema(ctx, &pb.GetSchemaRequest{Name: created.Name}); status.Code(err) != codes.NotFound {
		t.Errorf("GetSchema after DeleteSchema = %v, want NotFound", err)
	}
}

func TestIAM(t *testing.T) {
	srv, _ := start(t)
	ctx := context.Background()
	cc, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	conn := iampb.NewIAMPolicyClient(cc)
	got, err := conn.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{Resource: topic})
	if err != nil || len(got.Bindings) != 0 || len(got.Etag) == 0 {
		t.Fatalf("policy of a new topic = %v, %v; want none, with an etag", got, err)
	}
	set, err := conn.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: topic, Policy: &iampb.Policy{Etag: got.Etag,
		Bindings: []*iampb.Binding{{Role: "roles/pubsub.publisher", Members: []string{"serviceAccount:a@b.iam.gserviceaccount.com"}}}}})
	if err != nil || bytes.Equal(set.Etag, got.Etag) {
		t.Fatalf("set policy = %v, %v; want a new etag", set, err)
	}
	_, err = conn.SetIamPolicy(ctx, &iampb.SetIamPolicyRequest{Resource: topic, Policy: &iampb.Policy{Etag: got.Etag}})
	wantCode(t, "set with a stale etag", err, codes.Aborted, "")
	perms, err := conn.TestIamPermissions(ctx, &iampb.TestIamPermissionsRequest{Resource: topic, Permissions: []string{"pubsub.topics.get", "pubsub.topics.update"}})
	if err != nil || len(perms.Permissions) != 2 {
		t.Errorf("test permissions = %v, %v; want both granted", perms, err)
	}
	_, err = conn.GetIamPolicy(ctx, &iampb.GetIamPolicyRequest{Resource: "projects/p/subscriptions/missing"})
	wantCode(t, "policy of a missing subscription", err, codes.NotFound, "")
}

func TestSnapshotsAndPurge(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	sub := subscribe(t, c, "snap", false)
	srv.PublishMessage(topic, []byte("old"), nil)
	snapName := "projects/p/snapshots/snap-1"
	snap, err := c.SubscriptionAdminClient.CreateSnapshot(ctx, &pb.CreateSnapshotRequest{Name: snapName, Subscription: sub, Labels: map[string]string{"a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(snap.ExpireTime.AsTime()); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour {
		t.Errorf("snapshot expires in %v, want 7 days less the age of the oldest message", d)
	}
	_, err = c.SubscriptionAdminClient.CreateSnapshot(ctx, &pb.CreateSnapshotRequest{Name: snapName, Subscription: sub})
	wantCode(t, "snapshot twice", err, codes.AlreadyExists, "")
	// Purge, then seek back to the snapshot: "old" comes again.
	if _, err := c.SubscriptionAdminClient.Seek(ctx, &pb.SeekRequest{Subscription: sub, Target: &pb.SeekRequest_Time{Time: timestamppb.New(time.Now().Add(time.Hour))}}); err != nil {
		t.Fatal(err)
	}
	resp, err := c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: sub, MaxMessages: 10, ReturnImmediately: true})
	if err != nil || len(resp.ReceivedMessages) != 0 {
		t.Fatalf("pull after a purge = %v, %v; want nothing", resp, err)
	}
	if _, err := c.SubscriptionAdminClient.Seek(ctx, &pb.SeekRequest{Subscription: sub, Target: &pb.SeekRequest_Snapshot{Snapshot: snapName}}); err != nil {
		t.Fatal(err)
	}
	resp, err = c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: sub, MaxMessages: 10})
	if err != nil || len(resp.ReceivedMessages) != 1 || string(resp.ReceivedMessages[0].Message.Data) != "old" {
		t.Fatalf("pull after a seek to the snapshot = %v, %v; want old", resp, err)
	}
	if err := c.SubscriptionAdminClient.DeleteSnapshot(ctx, &pb.DeleteSnapshotRequest{Snapshot: snapName}); err != nil {
		t.Fatal(err)
	}
	for got, err := range c.SubscriptionAdminClient.ListSnapshots(ctx, &pb.ListSnapshotsRequest{Project: "projects/p"}).All() {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("ListSnapshots after DeleteSnapshot gave %s", got.Name)
	}
}

// TestSaveRestore: a restored server holds each subscription's own
// backlog: what one acknowledged it does not get again, the other does.
func TestSaveRestore(t *testing.T) {
	srv, c := start(t)
	ctx := context.Background()
	a, b := subscribe(t, c, "a", false), subscribe(t, c, "b", false)
	srv.PublishMessage(topic, []byte("x"), nil)
	resp, err := c.SubscriptionAdminClient.Pull(ctx, &pb.PullRequest{Subscription: a, MaxMessages: 1})
	if err != nil || len(resp.ReceivedMessages) != 1 {
		t.Fatalf("pull = %v, %v", resp, err)
	}
	if err := c.SubscriptionAdminClient.Acknowledge(ctx, &pb.AcknowledgeRequest{Subscription: a, AckIds: []string{resp.ReceivedMessages[0].AckId}}); err != nil {
		t.Fatal(err)
	}
	st, err := srv.Save()
	if err != nil {
		t.Fatal(err)
	}
	srv2, err := psemu.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	if err := srv2.Restore(st); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		sub  string
		want int
	}{{a, 0}, {b, 1}} {
		resp, err := srv2.Pull(ctx, &pb.PullRequest{Subscription: tt.sub, MaxMessages: 10, ReturnImmediately: true})
		if err != nil || len(resp.ReceivedMessages) != tt.want {
			t.Errorf("restored %s pulled %v, %v; want %d messages", tt.sub, resp, err, tt.want)
		}
	}
	if id := srv2.PublishMessage(topic, []byte("y"), nil); id == srv.Messages()[0].ID {
		t.Errorf("restored server gave ID %s again", id)
	}
}
