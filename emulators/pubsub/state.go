package pubsub

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// deletedTopic is the topic a subscription names once its topic is
// deleted, as on Pub/Sub.
const deletedTopic = "_deleted-topic_"

// Pub/Sub's defaults and bounds for a subscription (pubsub.proto's
// comments on Subscription).
const (
	defaultAckDeadline = 10 * time.Second
	defaultRetention   = 7 * 24 * time.Hour
	minRetention       = 10 * time.Minute
	maxRetention       = 31 * 24 * time.Hour
)

// message is one publication: the message as subscribers get it, with its
// ID and publish time, and the bookkeeping that Messages reports.
type message struct {
	seq   int64 // order of publication; the ID is its decimal form
	topic string
	pb    *pb.PubsubMessage
	size  int64
	// acks counts the acknowledgements over every subscription, and
	// modacks the lease changes, for Messages.
	acks    int
	modacks []Modack
}

func (m *message) published() time.Time { return m.pb.GetPublishTime().AsTime() }

// topic is a topic and the snapshots that retain what is published to it.
type topic struct {
	pb        *pb.Topic
	snapshots map[string]*snapshot
}

// entry is a message in a subscription's backlog.
type entry struct {
	m *message
	// visible is when subscribers may first get it (see deliveryDelay).
	visible time.Time
	acked   bool
	ackedAt time.Time
	// attempt counts deliveries. delivery numbers the current one among
	// all of the server's, so that an ack ID, ackID(seq, delivery), is
	// never given twice.
	attempt  int32
	delivery int64
	// until is the end of the lease of a delivered message; zero when the
	// message is available. owner is the stream it was delivered on (nil
	// for Pull), to keep an ordering key on one stream.
	until time.Time
	owner *stream
}

func (e *entry) leased() bool { return !e.until.IsZero() }

// subscription is a subscription and its backlog, in the order of
// publication.
type subscription struct {
	pb      *pb.Subscription
	created time.Time
	filter  *filter
	backlog []*entry
	// streams are the streams and pulls waiting on the subscription.
	streams map[*stream]struct{}
	// dead counts the acknowledged entries since pruned, when the backlog
	// was last pruned.
	dead   int
	pruned time.Time
}

// snapshot holds what a subscription had not acknowledged when it was
// taken, and everything published to the topic since.
type snapshot struct {
	pb      *pb.Snapshot
	t       *topic
	created time.Time
	msgs    []*message
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ackID is the ack ID of the delivery of the message seq.
func ackID(seq, delivery int64) string {
	return strconv.FormatInt(seq, 10) + "-" + strconv.FormatInt(delivery, 10)
}

// parseAckID is the inverse of ackID.
func parseAckID(id string) (seq, delivery int64, ok bool) {
	a, b, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseInt(b, 10, 64)
	return s, n, err1 == nil && err2 == nil && n > 0
}

// find returns the backlog entry of the message seq, or nil.
func (sub *subscription) find(seq int64) *entry {
	i := sort.Search(len(sub.backlog), func(i int) bool { return sub.backlog[i].m.seq >= seq })
	if i < len(sub.backlog) && sub.backlog[i].m.seq == seq {
		return sub.backlog[i]
	}
	return nil
}

// resourceID matches what Pub/Sub accepts as the last part of a topic,
// subscription, snapshot or schema name: "It must start with a letter, and
// contain only letters, numbers, dashes, periods, underscores, tildes,
// percent signs or plus signs. It must be between 3 and 255 characters in
// length, and it must not start with goog."
var resourceID = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9\-._~%+]{2,254}$`)

// parseName checks that name is projects/{project}/{kind}/{id} and returns
// the project.
func parseName(name, kind string) (project string, err error) {
	parts := strings.Split(name, "/")
	if len(parts) != 4 || parts[0] != "projects" || parts[1] == "" || parts[2] != kind ||
		!resourceID.MatchString(parts[3]) || strings.HasPrefix(strings.ToLower(parts[3]), "goog") {
		return "", invalidName(name)
	}
	return parts[1], nil
}

// invalidName is Pub/Sub's answer to a malformed resource name.
func invalidName(name string) error {
	return status.Errorf(codes.InvalidArgument, "Invalid resource name given (name=%s). Refer to https://cloud.google.com/pubsub/docs/pubsub-basics#resource_names for more information.", name)
}

// parseProject checks that name is projects/{project}.
func parseProject(name string) (string, error) {
	p, ok := strings.CutPrefix(name, "projects/")
	if !ok || p == "" || strings.Contains(p, "/") {
		return "", invalidName(name)
	}
	return p, nil
}

func inProject(name, project string) bool {
	return strings.HasPrefix(name, "projects/"+project+"/")
}

// page returns the names, sorted, of one page of a list: the page token is
// the last name of the previous page.
// namesIn is the names of m's resources in project.
func namesIn[V any](m map[string]V, project string) []string {
	var names []string
	for n := range m {
		if inProject(n, project) {
			names = append(names, n)
		}
	}
	return names
}

func page(names []string, size int32, token string) (out []string, next string) {
	sort.Strings(names)
	if size <= 0 || size > 1000 {
		size = 1000
	}
	i := sort.SearchStrings(names, token)
	if token != "" && i < len(names) && names[i] == token {
		i++
	}
	out = names[i:]
	if len(out) > int(size) {
		out = out[:size]
		next = out[len(out)-1]
	}
	return out, next
}

// notFound and exists are Pub/Sub's answers for a missing resource and
// one created twice.
func notFound(name string) error {
	return status.Errorf(codes.NotFound, "Resource not found (resource=%s).", lastPart(name))
}

func exists(name string) error {
	return status.Errorf(codes.AlreadyExists, "Resource already exists in the project (resource=%s).", lastPart(name))
}

func lastPart(name string) string { return name[strings.LastIndex(name, "/")+1:] }

func errorf(code codes.Code, format string, args ...any) error {
	return status.Error(code, fmt.Sprintf(format, args...))
}
