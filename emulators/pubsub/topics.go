package pubsub

import (
	"context"
	"slices"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// topicFields are the fields of a Topic that UpdateTopic may change.
var topicFields = []string{"labels", "message_storage_policy", "kms_key_name", "schema_settings",
	"message_retention_duration", "ingestion_data_source_settings", "message_transforms"}

func (s *Server) CreateTopic(_ context.Context, req *pb.Topic) (*pb.Topic, error) {
	if _, err := parseName(req.GetName(), "topics"); err != nil {
		return nil, err
	}
	if err := checkTopic(req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[req.Name]; ok {
		return nil, exists(req.Name)
	}
	if err := checkSchemaSettings(req.GetSchemaSettings()); err != nil {
		return nil, err
	}
	t := proto.Clone(req).(*pb.Topic)
	t.State = pb.Topic_ACTIVE
	s.topics[t.Name] = &topic{pb: t, snapshots: map[string]*snapshot{}}
	return proto.Clone(t).(*pb.Topic), nil
}

// checkTopic checks the fields of a topic that Pub/Sub bounds.
func checkTopic(t *pb.Topic) error {
	if d := t.GetMessageRetentionDuration(); d != nil {
		if v := d.AsDuration(); v < minRetention || v > maxRetention {
			return errorf(codes.InvalidArgument, "Invalid message_retention_duration: it must be between 10 minutes and 31 days.")
		}
	}
	return nil
}

func (s *Server) GetTopic(_ context.Context, req *pb.GetTopicRequest) (*pb.Topic, error) {
	if _, err := parseName(req.GetTopic(), "topics"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[req.Topic]
	if !ok {
		return nil, notFound(req.Topic)
	}
	return proto.Clone(t.pb).(*pb.Topic), nil
}

func (s *Server) UpdateTopic(_ context.Context, req *pb.UpdateTopicRequest) (*pb.Topic, error) {
	name := req.GetTopic().GetName()
	if _, err := parseName(name, "topics"); err != nil {
		return nil, err
	}
	if len(req.GetUpdateMask().GetPaths()) == 0 {
		return nil, errorf(codes.InvalidArgument, "The update_mask in the UpdateTopicRequest must be set.")
	}
	if err := checkTopic(req.Topic); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	if !ok {
		return nil, notFound(name)
	}
	if slices.Contains(req.UpdateMask.Paths, "schema_settings") {
		if err := checkSchemaSettings(req.Topic.GetSchemaSettings()); err != nil {
			return nil, err
		}
	}
	next := proto.Clone(t.pb).(*pb.Topic)
	if err := applyMask(next, req.Topic, req.UpdateMask.Paths, topicFields); err != nil {
		return nil, err
	}
	t.pb = next
	return proto.Clone(next).(*pb.Topic), nil
}

func (s *Server) ListTopics(_ context.Context, req *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error) {
	project, err := parseProject(req.GetProject())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names, next := page(namesIn(s.topics, project), req.PageSize, req.PageToken)
	resp := &pb.ListTopicsResponse{NextPageToken: next}
	for _, n := range names {
		resp.Topics = append(resp.Topics, proto.Clone(s.topics[n].pb).(*pb.Topic))
	}
	return resp, nil
}

func (s *Server) ListTopicSubscriptions(_ context.Context, req *pb.ListTopicSubscriptionsRequest) (*pb.ListTopicSubscriptionsResponse, error) {
	if _, err := parseName(req.GetTopic(), "topics"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.topics[req.Topic]; !ok {
		return nil, notFound(req.Topic)
	}
	var names []string
	for n, sub := range s.subs {
		if sub.pb.Topic == req.Topic {
			names = append(names, n)
		}
	}
	names, next := page(names, req.PageSize, req.PageToken)
	return &pb.ListTopicSubscriptionsResponse{Subscriptions: names, NextPageToken: next}, nil
}

// DeleteTopic deletes a topic. Its subscriptions and snapshots stay, with
// the topic _deleted-topic_: a subscription's backlog is kept, but it gets
// nothing more.
func (s *Server) DeleteTopic(_ context.Context, req *pb.DeleteTopicRequest) (*emptypb.Empty, error) {
	if _, err := parseName(req.GetTopic(), "topics"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[req.Topic]
	if !ok {
		return nil, notFound(req.Topic)
	}
	delete(s.topics, req.Topic)
	delete(s.policies, req.Topic)
	for _, sub := range s.subs {
		if sub.pb.Topic == req.Topic {
			sub.pb.Topic = deletedTopic
		}
	}
	for _, snap := range t.snapshots {
		snap.pb.Topic = deletedTopic
	}
	return &emptypb.Empty{}, nil
}

// DetachSubscription detaches a subscription from its topic: it stays,
// marked detached, its backlog is dropped and it gets nothing more; a pull
// answers FAILED_PRECONDITION.
func (s *Server) DetachSubscription(_ context.Context, req *pb.DetachSubscriptionRequest) (*pb.DetachSubscriptionResponse, error) {
	if _, err := parseName(req.GetSubscription(), "subscriptions"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[req.Subscription]
	if !ok {
		return nil, notFound(req.Subscription)
	}
	sub.pb.Detached = true
	for _, e := range sub.backlog {
		release(e)
	}
	sub.backlog = nil
	sub.wake()
	return &pb.DetachSubscriptionResponse{}, nil
}
