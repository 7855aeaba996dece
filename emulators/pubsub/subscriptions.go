package pubsub

import (
	"context"
	"slices"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// subscriptionFields are the fields of a Subscription that
// UpdateSubscription may change; the topic, filter and ordering are fixed
// at creation, as on Pub/Sub.
var subscriptionFields = []string{"push_config", "bigquery_config", "cloud_storage_config", "ack_deadline_seconds",
	"retain_acked_messages", "message_retention_duration", "labels", "expiration_policy", "dead_letter_policy",
	"retry_policy", "enable_exactly_once_delivery", "message_transforms", "detached"}

// defaultExpiration is the expiration policy Pub/Sub gives a subscription
// created without one.
const defaultExpiration = 31 * 24 * time.Hour

func (s *Server) CreateSubscription(_ context.Context, req *pb.Subscription) (*pb.Subscription, error) {
	if _, err := parseName(req.GetName(), "subscriptions"); err != nil {
		return nil, err
	}
	if _, err := parseName(req.GetTopic(), "topics"); err != nil {
		return nil, err
	}
	sub := proto.Clone(req).(*pb.Subscription)
	if sub.AckDeadlineSeconds == 0 {
		sub.AckDeadlineSeconds = int32(defaultAckDeadline / time.Second)
	}
	if sub.MessageRetentionDuration == nil {
		sub.MessageRetentionDuration = durationpb.New(defaultRetention)
	}
	if sub.ExpirationPolicy == nil {
		sub.ExpirationPolicy = &pb.ExpirationPolicy{Ttl: durationpb.New(defaultExpiration)}
	}
	if sub.PushConfig == nil {
		sub.PushConfig = &pb.PushConfig{}
	}
	if p := sub.DeadLetterPolicy; p != nil && p.MaxDeliveryAttempts == 0 {
		p.MaxDeliveryAttempts = 5
	}
	if err := checkSubscription(sub); err != nil {
		return nil, err
	}
	f, err := parseFilter(sub.Filter)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.subs[sub.Name]; ok {
		return nil, exists(sub.Name)
	}
	t, ok := s.topics[sub.Topic]
	if !ok {
		return nil, notFound(sub.Topic)
	}
	if err := s.checkDeadLetter(sub); err != nil {
		return nil, err
	}
	sub.TopicMessageRetentionDuration = t.pb.MessageRetentionDuration
	sub.State = pb.Subscription_ACTIVE
	s.subs[sub.Name] = &subscription{pb: sub, created: s.now(), filter: f, streams: map[*stream]struct{}{}}
	return proto.Clone(sub).(*pb.Subscription), nil
}

// checkSubscription checks the fields of a subscription that Pub/Sub
// bounds.
func checkSubscription(sub *pb.Subscription) error {
	if d := sub.AckDeadlineSeconds; d < 10 || d > 600 {
		return errorf(codes.InvalidArgument, "Invalid ack_deadline_seconds(%d). Must be between 10 and 600 seconds.", d)
	}
	if d := sub.MessageRetentionDuration.AsDuration(); d < minRetention || d > maxRetention {
		return errorf(codes.InvalidArgument, "Invalid message_retention_duration: it must be between 10 minutes and 31 days.")
	}
	if p := sub.DeadLetterPolicy; p != nil && (p.MaxDeliveryAttempts < 5 || p.MaxDeliveryAttempts > 100) {
		return errorf(codes.InvalidArgument, "Invalid max_delivery_attempts(%d). Must be between 5 and 100.", p.MaxDeliveryAttempts)
	}
	if p := sub.RetryPolicy; p != nil {
		lo, hi := p.MinimumBackoff.AsDuration(), p.MaximumBackoff.AsDuration()
		if lo < 0 || hi > 600*time.Second || (p.MaximumBackoff != nil && lo > hi) {
			return errorf(codes.InvalidArgument, "Invalid retry_policy: the backoffs must be between 0 and 600 seconds, the minimum no more than the maximum.")
		}
	}
	return nil
}

// checkDeadLetter checks that a dead letter topic exists. Must be called
// with the lock held.
func (s *Server) checkDeadLetter(sub *pb.Subscription) error {
	p := sub.GetDeadLetterPolicy()
	if p == nil || p.DeadLetterTopic == "" {
		return nil
	}
	if _, ok := s.topics[p.DeadLetterTopic]; !ok {
		return notFound(p.DeadLetterTopic)
	}
	return nil
}

func (s *Server) GetSubscription(_ context.Context, req *pb.GetSubscriptionRequest) (*pb.Subscription, error) {
	if _, err := parseName(req.GetSubscription(), "subscriptions"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[req.Subscription]
	if !ok {
		return nil, notFound(req.Subscription)
	}
	return proto.Clone(sub.pb).(*pb.Subscription), nil
}

func (s *Server) UpdateSubscription(_ context.Context, req *pb.UpdateSubscriptionRequest) (*pb.Subscription, error) {
	name := req.GetSubscription().GetName()
	if _, err := parseName(name, "subscriptions"); err != nil {
		return nil, err
	}
	if len(req.GetUpdateMask().GetPaths()) == 0 {
		return nil, errorf(codes.InvalidArgument, "The update_mask in the UpdateSubscriptionRequest must be set.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[name]
	if !ok {
		return nil, notFound(name)
	}
	next := proto.Clone(sub.pb).(*pb.Subscription)
	if err := applyMask(next, req.Subscription, req.UpdateMask.Paths, subscriptionFields); err != nil {
		return nil, err
	}
	// A field the mask clears goes back to its default.
	if next.AckDeadlineSeconds == 0 {
		next.AckDeadlineSeconds = int32(defaultAckDeadline / time.Second)
	}
	if next.MessageRetentionDuration == nil {
		next.MessageRetentionDuration = durationpb.New(defaultRetention)
	}
	if next.PushConfig == nil {
		next.PushConfig = &pb.PushConfig{}
	}
	if sub.pb.Detached && !next.Detached {
		return nil, errorf(codes.InvalidArgument, "A detached subscription cannot be attached again.")
	}
	if err := checkSubscription(next); err != nil {
		return nil, err
	}
	if slices.Contains(req.UpdateMask.Paths, "dead_letter_policy") {
		if err := s.checkDeadLetter(next); err != nil {
			return nil, err
		}
	}
	if next.Detached && !sub.pb.Detached {
		for _, e := range sub.backlog {
			release(e)
		}
		sub.backlog = nil
	}
	sub.pb = next
	sub.wake()
	return proto.Clone(next).(*pb.Subscription), nil
}

func (s *Server) ListSubscriptions(_ context.Context, req *pb.ListSubscriptionsRequest) (*pb.ListSubscriptionsResponse, error) {
	project, err := parseProject(req.GetProject())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names, next := page(namesIn(s.subs, project), req.PageSize, req.PageToken)
	resp := &pb.ListSubscriptionsResponse{NextPageToken: next}
	for _, n := range names {
		resp.Subscriptions = append(resp.Subscriptions, proto.Clone(s.subs[n].pb).(*pb.Subscription))
	}
	return resp, nil
}

// DeleteSubscription deletes a subscription and its backlog; its streams
// end with NOT_FOUND. Its snapshots stay.
func (s *Server) DeleteSubscription(_ context.Context, req *pb.DeleteSubscriptionRequest) (*emptypb.Empty, error) {
	if _, err := parseName(req.GetSubscription(), "subscriptions"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[req.Subscription]
	if !ok {
		return nil, notFound(req.Subscription)
	}
	delete(s.subs, req.Subscription)
	delete(s.policies, req.Subscription)
	sub.wake()
	return &emptypb.Empty{}, nil
}
