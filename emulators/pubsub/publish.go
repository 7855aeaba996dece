package pubsub

import (
	"context"
	"strconv"
	"time"
	"unicode/utf8"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Pub/Sub's limits on a publish request and its messages
// (cloud.google.com/pubsub/quotas#resource_limits).
const (
	maxMessages       = 1000
	maxAttributes     = 100
	maxAttrKeyBytes   = 256
	maxAttrValueBytes = 1024
	maxOrderingKey    = 1024
)

// Publish takes the messages of a request, all or none, and answers their
// IDs in the order of the request.
func (s *Server) Publish(ctx context.Context, req *pb.PublishRequest) (*pb.PublishResponse, error) {
	return s.publish(ctx, req)
}

func (s *Server) publish(_ context.Context, req *pb.PublishRequest) (*pb.PublishResponse, error) {
	if _, err := parseName(req.GetTopic(), "topics"); err != nil {
		return nil, err
	}
	if err := checkPublish(req); err != nil {
		return nil, err
	}
	s.mu.Lock()
	t, ok := s.topics[req.Topic]
	if !ok {
		s.mu.Unlock()
		return nil, notFound(req.Topic)
	}
	now := s.now()
	resp := &pb.PublishResponse{}
	msgs := make([]*message, len(req.Messages))
	for i, m := range req.Messages {
		s.seq++
		c := proto.Clone(m).(*pb.PubsubMessage)
		c.MessageId = strconv.FormatInt(s.seq, 10)
		c.PublishTime = ts(now)
		msgs[i] = &message{seq: s.seq, topic: req.Topic, pb: c, size: int64(proto.Size(c))}
		resp.MessageIds = append(resp.MessageIds, c.MessageId)
	}
	s.published = append(s.published, msgs...)
	s.deliverToTopic(t, msgs)
	s.mu.Unlock()
	s.observe(req.Topic, msgs)
	return resp, nil
}

// deliveryDelay is how long after its publication a message is first
// delivered. On Pub/Sub delivery takes longer than the answer to the
// publisher, and clients rely on it: a subscriber that waits for a message
// whose ID its publish returned (the Node.js client's system tests do)
// would otherwise get the message before the ID and let it by.
const deliveryDelay = 20 * time.Millisecond

// deliverToTopic adds msgs to the backlog of each subscription of t whose
// filter they match and to t's snapshots, and wakes the subscriptions'
// streams once the messages may be delivered.
func (s *Server) deliverToTopic(t *topic, msgs []*message) {
	for _, snap := range t.snapshots {
		snap.msgs = append(snap.msgs, msgs...)
	}
	visible := s.now().Add(deliveryDelay)
	var woken []*subscription
	for _, sub := range s.subs {
		if sub.pb.Topic != t.pb.Name || sub.pb.Detached {
			continue
		}
		added := false
		for _, m := range msgs {
			if sub.filter.match(m.pb.Attributes) {
				sub.backlog = append(sub.backlog, &entry{m: m, visible: visible})
				added = true
			}
		}
		if added {
			woken = append(woken, sub)
		}
	}
	if len(woken) > 0 {
		time.AfterFunc(deliveryDelay, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, sub := range woken {
				sub.wake()
			}
		})
	}
}

// checkPublish checks a request against Pub/Sub's limits.
func checkPublish(req *pb.PublishRequest) error {
	switch n := len(req.Messages); {
	case n == 0:
		return errorf(codes.InvalidArgument, "The request must contain at least one message.")
	case n > maxMessages:
		return errorf(codes.InvalidArgument, "The value for message_count is too large. You passed %d in the request, but the maximum value is %d.", n, maxMessages)
	}
	if size := proto.Size(req); size > maxRequestBytes {
		return errorf(codes.InvalidArgument, "Request payload size exceeds the limit: %d bytes.", maxRequestBytes)
	}
	for _, m := range req.Messages {
		if len(m.Data) == 0 && len(m.Attributes) == 0 {
			return errorf(codes.InvalidArgument, "One or more messages in the publish request is empty. Each message must contain either non-empty data, or at least one attribute.")
		}
		if len(m.Attributes) > maxAttributes {
			return errorf(codes.InvalidArgument, "A message has %d attributes; the maximum is %d.", len(m.Attributes), maxAttributes)
		}
		for k, v := range m.Attributes {
			switch {
			case k == "":
				return errorf(codes.InvalidArgument, "An attribute key is empty.")
			case len(k) > maxAttrKeyBytes:
				return errorf(codes.InvalidArgument, "The attribute key '%.20s...' is %d bytes long; the maximum is %d.", k, len(k), maxAttrKeyBytes)
			case len(v) > maxAttrValueBytes:
				return errorf(codes.InvalidArgument, "The value of the attribute '%s' is %d bytes long; the maximum is %d.", k, len(v), maxAttrValueBytes)
			case !utf8.ValidString(k) || !utf8.ValidString(v):
				return errorf(codes.InvalidArgument, "The attribute '%s' is not valid UTF-8.", k)
			}
		}
		if len(m.OrderingKey) > maxOrderingKey {
			return errorf(codes.InvalidArgument, "The ordering key is %d bytes long; the maximum is %d.", len(m.OrderingKey), maxOrderingKey)
		}
	}
	return nil
}
