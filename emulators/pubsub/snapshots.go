package pubsub

import (
	"context"
	"slices"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// snapshotLife is how long a snapshot may live: Pub/Sub's "7 days minus
// the age of the oldest unacknowledged message in the subscription".
const snapshotLife = 7 * 24 * time.Hour

func (s *Server) CreateSnapshot(_ context.Context, req *pb.CreateSnapshotRequest) (*pb.Snapshot, error) {
	if _, err := parseName(req.GetName(), "snapshots"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, err := s.subscriptionFor(req.GetSubscription())
	if err != nil {
		return nil, err
	}
	s.expireSnapshots()
	if _, ok := s.snapshots[req.Name]; ok {
		return nil, exists(req.Name)
	}
	t := s.topics[sub.pb.Topic]
	if t == nil {
		return nil, errorf(codes.FailedPrecondition, "The subscription's topic was deleted (resource=%s).", lastPart(sub.pb.Name))
	}
	now := s.now()
	oldest := now
	var msgs []*message
	for _, e := range sub.backlog {
		if !e.acked {
			msgs = append(msgs, e.m)
			oldest = minTime(oldest, e.m.published())
		}
	}
	expire := oldest.Add(snapshotLife)
	if expire.Sub(now) < time.Hour {
		return nil, errorf(codes.FailedPrecondition, "The subscription's oldest unacked message is too old: the snapshot would expire in less than 1 hour.")
	}
	snap := &snapshot{
		pb:      &pb.Snapshot{Name: req.Name, Topic: t.pb.Name, ExpireTime: ts(expire), Labels: req.Labels},
		t:       t,
		created: now,
		msgs:    msgs,
	}
	s.snapshots[req.Name] = snap
	t.snapshots[req.Name] = snap
	return proto.Clone(snap.pb).(*pb.Snapshot), nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// expireSnapshots deletes the snapshots past their expire time. Must be
// called with the lock held.
func (s *Server) expireSnapshots() {
	now := s.now()
	for name, snap := range s.snapshots {
		if now.After(snap.pb.ExpireTime.AsTime()) {
			s.dropSnapshot(name)
		}
	}
}

func (s *Server) dropSnapshot(name string) {
	if snap := s.snapshots[name]; snap != nil {
		delete(snap.t.snapshots, name)
	}
	delete(s.snapshots, name)
	delete(s.policies, name)
}

// snapshot returns the snapshot name. Must be called with the lock held.
func (s *Server) snapshot(name string) (*snapshot, error) {
	if _, err := parseName(name, "snapshots"); err != nil {
		return nil, err
	}
	s.expireSnapshots()
	snap, ok := s.snapshots[name]
	if !ok {
		return nil, notFound(name)
	}
	return snap, nil
}

func (s *Server) ListSnapshots(_ context.Context, req *pb.ListSnapshotsRequest) (*pb.ListSnapshotsResponse, error) {
	project, err := parseProject(req.GetProject())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSnapshots()
	names, next := page(namesIn(s.snapshots, project), req.PageSize, req.PageToken)
	resp := &pb.ListSnapshotsResponse{NextPageToken: next}
	for _, n := range names {
		resp.Snapshots = append(resp.Snapshots, proto.Clone(s.snapshots[n].pb).(*pb.Snapshot))
	}
	return resp, nil
}

func (s *Server) DeleteSnapshot(_ context.Context, req *pb.DeleteSnapshotRequest) (*emptypb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.snapshot(req.GetSnapshot()); err != nil {
		return nil, err
	}
	s.dropSnapshot(req.Snapshot)
	return &emptypb.Empty{}, nil
}

// Seek sets which messages of a subscription are acknowledged: to a
// snapshot, those it did not retain; to a time, those published before it.
// Leases end, and the ack IDs delivered before the seek settle nothing.
func (s *Server) Seek(_ context.Context, req *pb.SeekRequest) (*pb.SeekResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, err := s.subscriptionFor(req.GetSubscription())
	if err != nil {
		return nil, err
	}
	now := s.now()
	unacked := map[int64]bool{}
	var more []*message // retained elsewhere: by a snapshot
	switch target := req.Target.(type) {
	case *pb.SeekRequest_Snapshot:
		snap, err := s.snapshot(target.Snapshot)
		if err != nil {
			return nil, err
		}
		if snap.pb.Topic != sub.pb.Topic {
			return nil, errorf(codes.InvalidArgument, "The snapshot's topic is not the subscription's topic.")
		}
		for _, m := range snap.msgs {
			unacked[m.seq] = true
		}
		more = snap.msgs
	case *pb.SeekRequest_Time:
		at := target.Time.AsTime()
		for _, e := range sub.backlog {
			if !e.m.published().Before(at) {
				unacked[e.m.seq] = true
			}
		}
		// A snapshot of the topic retains what was published since it
		// was taken, for this subscription too.
		from := sub.created
		if at.After(from) {
			from = at
		}
		if t := s.topics[sub.pb.Topic]; t != nil {
			for _, snap := range t.snapshots {
				for _, m := range snap.msgs {
					if !m.published().Before(from) {
						unacked[m.seq] = true
						more = append(more, m)
					}
				}
			}
		}
	default:
		return nil, errorf(codes.InvalidArgument, "A seek needs a time or a snapshot.")
	}
	have := map[int64]bool{}
	for _, e := range sub.backlog {
		have[e.m.seq] = true
		release(e)
		if unacked[e.m.seq] {
			e.acked = false
			e.delivery = 0 // earlier ack IDs are void
		} else if !e.acked {
			e.acked, e.ackedAt = true, now
			sub.dead++
		}
	}
	for _, m := range more {
		if !have[m.seq] && sub.filter.match(m.pb.Attributes) {
			have[m.seq] = true
			sub.backlog = append(sub.backlog, &entry{m: m})
		}
	}
	slices.SortFunc(sub.backlog, func(a, b *entry) int { return int(a.m.seq - b.m.seq) })
	sub.wake()
	return &pb.SeekResponse{}, nil
}
