package pubsub

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	iampb "cloud.google.com/go/iam/apiv1/iampb"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/kubernetes/emulators/faults"
)

// maxRequestBytes is Pub/Sub's limit on a publish request; the gRPC server
// takes more, so that a larger request reaches Publish and is refused in
// Pub/Sub's words rather than gRPC's (RESOURCE_EXHAUSTED, which clients
// retry).
const (
	maxRequestBytes = 10 << 20
	maxRecvBytes    = 32 << 20
)

// Server is the Pub/Sub emulator served at Addr. It implements Pub/Sub's
// Publisher, Subscriber and SchemaService and the IAM policy methods; its
// methods may be called in process too, without the faults injected.
type Server struct {
	pb.UnimplementedPublisherServer
	pb.UnimplementedSubscriberServer
	pb.UnimplementedSchemaServiceServer
	iampb.UnimplementedIAMPolicyServer
	// Injector fails, delays and counts the calls that arrive over gRPC.
	*faults.Injector

	// Addr is where clients connect (PUBSUB_EMULATOR_HOST).
	Addr string

	gsrv *grpc.Server
	now  func() time.Time

	mu         sync.Mutex
	topics     map[string]*topic
	subs       map[string]*subscription
	snapshots  map[string]*snapshot
	schemas    map[string][]*pb.Schema // revisions, newest first
	policies   map[string]*iampb.Policy
	published  []*message // every message, for Messages
	seq        int64      // the last message's sequence number
	deliveries int64      // the last delivery's number
	revisions  int64      // the last schema revision's number
	etags      int64      // the last policy etag's number

	obsMu     sync.Mutex
	observers map[int]func(topic string, m *pb.PubsubMessage)
	observed  int
}

// Option configures a Server.
type Option func(*Server)

// WithReactor adds r to the reactors of the method funcName ("Publish",
// "StreamingPull", ...): see emulators/faults.
func WithReactor(funcName string, r faults.Reactor) Option {
	return func(s *Server) { s.AddReactor(funcName, r) }
}

// NewServer listens on addr (host:port; port 0 for a free one) and serves
// an empty Pub/Sub there.
func NewServer(addr string, opts ...Option) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pubsub emulator: listen on %s: %w", addr, err)
	}
	s := newState()
	s.Addr = lis.Addr().String()
	for _, o := range opts {
		o(s)
	}
	s.gsrv = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxRecvBytes),
		grpc.MaxSendMsgSize(maxRecvBytes),
		grpc.ChainUnaryInterceptor(s.UnaryInterceptor),
		grpc.ChainStreamInterceptor(s.StreamInterceptor),
	)
	pb.RegisterPublisherServer(s.gsrv, s)
	pb.RegisterSubscriberServer(s.gsrv, s)
	pb.RegisterSchemaServiceServer(s.gsrv, s)
	iampb.RegisterIAMPolicyServer(s.gsrv, s)
	s.SetMethods(faults.MethodsOf(s.gsrv))
	go func() { _ = s.gsrv.Serve(lis) }()
	return s, nil
}

func newState() *Server {
	return &Server{
		Injector:  &faults.Injector{},
		now:       time.Now,
		topics:    map[string]*topic{},
		subs:      map[string]*subscription{},
		snapshots: map[string]*snapshot{},
		schemas:   map[string][]*pb.Schema{},
		policies:  map[string]*iampb.Policy{},
	}
}

// Close ends every stream and stops the server.
func (s *Server) Close() error {
	s.gsrv.Stop()
	return nil
}

// OnPublish calls f with each message published, once the server has
// taken it (its MessageId and PublishTime set), until stop is called. It
// observes without a subscription: nothing is leased, acknowledged or
// counted. f runs on the publisher's call and must not block.
func (s *Server) OnPublish(f func(topic string, m *pb.PubsubMessage)) (stop func()) {
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	if s.observers == nil {
		s.observers = map[int]func(string, *pb.PubsubMessage){}
	}
	s.observed++
	id := s.observed
	s.observers[id] = f
	return func() {
		s.obsMu.Lock()
		defer s.obsMu.Unlock()
		delete(s.observers, id)
	}
}

// observe tells the observers of the messages published to topic.
func (s *Server) observe(topic string, msgs []*message) {
	s.obsMu.Lock()
	fs := make([]func(string, *pb.PubsubMessage), 0, len(s.observers))
	for _, f := range s.observers {
		fs = append(fs, f)
	}
	s.obsMu.Unlock()
	for _, m := range msgs {
		for _, f := range fs {
			f(topic, proto.Clone(m.pb).(*pb.PubsubMessage))
		}
	}
}

// Message is a published message as Messages reports it.
type Message struct {
	ID          string
	Topic       string
	Data        []byte
	Attributes  map[string]string
	OrderingKey string
	PublishTime time.Time
	// Acks counts the acknowledgements of the message over all the
	// subscriptions of its topic; Modacks are its lease changes, oldest
	// first.
	Acks    int
	Modacks []Modack
}

// Modack is one change of a delivered message's lease: the server's, at
// delivery, or a client's.
type Modack struct {
	AckID       string
	AckDeadline int32 // seconds; 0 is a nack
	ReceivedAt  time.Time
}

// Messages returns every message published since the server started, in
// the order of publication.
func (s *Server) Messages() []*Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Message, len(s.published))
	for i, m := range s.published {
		out[i] = m.export()
	}
	return out
}

// Message returns the message of ID id, or nil.
func (s *Server) Message(id string) *Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.published {
		if m.pb.GetMessageId() == id {
			return m.export()
		}
	}
	return nil
}

func (m *message) export() *Message {
	c := proto.Clone(m.pb).(*pb.PubsubMessage)
	return &Message{
		ID: c.MessageId, Topic: m.topic, Data: c.Data, Attributes: c.Attributes, OrderingKey: c.OrderingKey,
		PublishTime: m.published(), Acks: m.acks, Modacks: append([]Modack(nil), m.modacks...),
	}
}

// PublishMessage publishes a message to topic in process and returns its
// ID. It panics if the topic does not exist or the message is refused, as
// it is for tests.
func (s *Server) PublishMessage(topic string, data []byte, attrs map[string]string) string {
	return s.PublishOrdered(topic, data, attrs, "")
}

// PublishOrdered is PublishMessage with an ordering key.
func (s *Server) PublishOrdered(topic string, data []byte, attrs map[string]string, key string) string {
	resp, err := s.publish(context.Background(), &pb.PublishRequest{
		Topic: topic, Messages: []*pb.PubsubMessage{{Data: data, Attributes: attrs, OrderingKey: key}},
	})
	if err != nil {
		panic(fmt.Sprintf("pubsub emulator: publish to %s: %v", topic, err))
	}
	return resp.MessageIds[0]
}

func ts(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }
