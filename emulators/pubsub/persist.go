package pubsub

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	iampb "cloud.google.com/go/iam/apiv1/iampb"
	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// State is the whole of a Server's state, as Save takes it and Restore
// puts it back, ready for encoding/json: topics, subscriptions with each
// one's backlog (acknowledged messages it retains included), snapshots,
// schema revisions and IAM policies. Leases are not kept: a restored
// message is available at once. The resources are protojson.
type State struct {
	Topics        []json.RawMessage   `json:"topics"`
	Subscriptions []SavedSubscription `json:"subscriptions"`
	Snapshots     []SavedSnapshot     `json:"snapshots"`
	// Schemas are every revision, each schema's newest first.
	Schemas  []json.RawMessage          `json:"schemas"`
	Policies map[string]json.RawMessage `json:"policies"`
	// Messages are those a backlog or a snapshot holds, by sequence
	// number (their IDs are its decimal form).
	Messages []SavedMessage `json:"messages"`
	// Seq, Revisions and Etags are the last numbers given, so that none is
	// given twice.
	Seq       int64 `json:"seq"`
	Revisions int64 `json:"revisions"`
	Etags     int64 `json:"etags"`
}

// SavedMessage is a message and the topic it was published to.
type SavedMessage struct {
	Seq     int64           `json:"seq"`
	Topic   string          `json:"topic"`
	Message json.RawMessage `json:"message"`
}

// SavedSubscription is a subscription and its backlog.
type SavedSubscription struct {
	Subscription json.RawMessage `json:"subscription"`
	Created      time.Time       `json:"created"`
	Backlog      []SavedEntry    `json:"backlog"`
}

// SavedEntry is a message of a backlog.
type SavedEntry struct {
	Seq      int64     `json:"seq"`
	Acked    bool      `json:"acked,omitempty"`
	AckedAt  time.Time `json:"ackedAt,omitzero"`
	Attempts int32     `json:"attempts,omitempty"`
}

// SavedSnapshot is a snapshot and the messages it holds.
type SavedSnapshot struct {
	Snapshot json.RawMessage `json:"snapshot"`
	Created  time.Time       `json:"created"`
	Seqs     []int64         `json:"seqs"`
}

// Save returns the server's state.
func (s *Server) Save() (*State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireSnapshots()
	now := s.now()
	st := &State{Seq: s.seq, Revisions: s.revisions, Etags: s.etags, Policies: map[string]json.RawMessage{},
		Topics: []json.RawMessage{}, Subscriptions: []SavedSubscription{}, Snapshots: []SavedSnapshot{},
		Schemas: []json.RawMessage{}, Messages: []SavedMessage{}}
	held := map[int64]*message{}
	for _, name := range sortedKeys(s.topics) {
		b, err := protojson.Marshal(s.topics[name].pb)
		if err != nil {
			return nil, fmt.Errorf("save topic %s: %w", name, err)
		}
		st.Topics = append(st.Topics, b)
	}
	for _, name := range sortedKeys(s.subs) {
		sub := s.subs[name]
		s.prune(sub, now)
		b, err := protojson.Marshal(sub.pb)
		if err != nil {
			return nil, fmt.Errorf("save subscription %s: %w", name, err)
		}
		ss := SavedSubscription{Subscription: b, Created: sub.created, Backlog: []SavedEntry{}}
		for _, e := range sub.backlog {
			ss.Backlog = append(ss.Backlog, SavedEntry{Seq: e.m.seq, Acked: e.acked, AckedAt: e.ackedAt, Attempts: e.attempt})
			held[e.m.seq] = e.m
		}
		st.Subscriptions = append(st.Subscriptions, ss)
	}
	for _, name := range sortedKeys(s.snapshots) {
		snap := s.snapshots[name]
		b, err := protojson.Marshal(snap.pb)
		if err != nil {
			return nil, fmt.Errorf("save snapshot %s: %w", name, err)
		}
		ss := SavedSnapshot{Snapshot: b, Created: snap.created, Seqs: []int64{}}
		for _, m := range snap.msgs {
			ss.Seqs = append(ss.Seqs, m.seq)
			held[m.seq] = m
		}
		st.Snapshots = append(st.Snapshots, ss)
	}
	for _, name := range sortedKeys(s.schemas) {
		for _, r := range s.schemas[name] {
			b, err := protojson.Marshal(r)
			if err != nil {
				return nil, fmt.Errorf("save schema %s: %w", name, err)
			}
			st.Schemas = append(st.Schemas, b)
		}
	}
	for name, p := range s.policies {
		b, err := protojson.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("save the policy of %s: %w", name, err)
		}
		st.Policies[name] = b
	}
	for _, seq := range sortedKeys(held) {
		m := held[seq]
		b, err := protojson.Marshal(m.pb)
		if err != nil {
			return nil, fmt.Errorf("save message %d: %w", seq, err)
		}
		st.Messages = append(st.Messages, SavedMessage{Seq: seq, Topic: m.topic, Message: b})
	}
	return st, nil
}

// Restore replaces the server's state with st. The streams open on the
// server end.
func (s *Server) Restore(st *State) error {
	n := newState()
	n.seq, n.revisions, n.etags = st.Seq, st.Revisions, st.Etags
	msgs := map[int64]*message{}
	for _, sm := range st.Messages {
		var m pb.PubsubMessage
		if err := protojson.Unmarshal(sm.Message, &m); err != nil {
			return fmt.Errorf("restore message %d: %w", sm.Seq, err)
		}
		msgs[sm.Seq] = &message{seq: sm.Seq, topic: sm.Topic, pb: &m, size: int64(proto.Size(&m))}
		n.seq = max(n.seq, sm.Seq)
	}
	for _, raw := range st.Topics {
		var t pb.Topic
		if err := protojson.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("restore topic: %w", err)
		}
		n.topics[t.Name] = &topic{pb: &t, snapshots: map[string]*snapshot{}}
	}
	for _, ss := range st.Subscriptions {
		var p pb.Subscription
		if err := protojson.Unmarshal(ss.Subscription, &p); err != nil {
			return fmt.Errorf("restore subscription: %w", err)
		}
		f, err := parseFilter(p.Filter)
		if err != nil {
			return fmt.Errorf("restore subscription %s: %w", p.Name, err)
		}
		sub := &subscription{pb: &p, created: ss.Created, filter: f, streams: map[*stream]struct{}{}}
		for _, se := range ss.Backlog {
			m := msgs[se.Seq]
			if m == nil {
				return fmt.Errorf("restore subscription %s: no message %d", p.Name, se.Seq)
			}
			sub.backlog = append(sub.backlog, &entry{m: m, acked: se.Acked, ackedAt: se.AckedAt, attempt: se.Attempts})
		}
		sort.Slice(sub.backlog, func(i, j int) bool { return sub.backlog[i].m.seq < sub.backlog[j].m.seq })
		n.subs[p.Name] = sub
	}
	for _, ss := range st.Snapshots {
		var p pb.Snapshot
		if err := protojson.Unmarshal(ss.Snapshot, &p); err != nil {
			return fmt.Errorf("restore snapshot: %w", err)
		}
		t := n.topics[p.Topic]
		if t == nil {
			// Its topic was deleted: it stays, fed by nothing.
			t = &topic{pb: &pb.Topic{Name: p.Topic}, snapshots: map[string]*snapshot{}}
		}
		snap := &snapshot{pb: &p, t: t, created: ss.Created}
		for _, seq := range ss.Seqs {
			m := msgs[seq]
			if m == nil {
				return fmt.Errorf("restore snapshot %s: no message %d", p.Name, seq)
			}
			snap.msgs = append(snap.msgs, m)
		}
		n.snapshots[p.Name] = snap
		t.snapshots[p.Name] = snap
	}
	for _, raw := range st.Schemas {
		var sc pb.Schema
		if err := protojson.Unmarshal(raw, &sc); err != nil {
			return fmt.Errorf("restore schema: %w", err)
		}
		n.schemas[sc.Name] = append(n.schemas[sc.Name], &sc)
	}
	for name, raw := range st.Policies {
		var p iampb.Policy
		if err := protojson.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("restore the policy of %s: %w", name, err)
		}
		n.policies[name] = &p
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range s.subs {
		sub.wake() // its streams find it gone and end
	}
	s.topics, s.subs, s.snapshots, s.schemas, s.policies = n.topics, n.subs, n.snapshots, n.schemas, n.policies
	s.seq, s.revisions, s.etags = max(s.seq, n.seq), max(s.revisions, n.revisions), max(s.etags, n.etags)
	s.published = nil
	for _, seq := range sortedKeys(msgs) {
		s.published = append(s.published, msgs[seq])
	}
	return nil
}

func sortedKeys[K int64 | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
