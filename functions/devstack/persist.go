package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	psemu "github.com/better-compute/kubernetes/emulators/pubsub"
)

// DefaultSaveInterval is how often a stack with a data file saves what
// changed.
const DefaultSaveInterval = time.Second

// dataVersion is the version of the data file's format. A file without
// one is an export of the Firestore emulator alone.
const dataVersion = 1

// savedData is the data file, as far as the devstack reads it: one JSON
// object with everything the stack keeps, written at one instant. Its
// "documents" are the Firestore emulator's export, which its Import reads
// from the same bytes (and the standalone emulator from the same file).
type savedData struct {
	Version int             `json:"version"`
	Issuer  *savedIssuer    `json:"issuer,omitempty"`
	PubSub  *savedPubSub    `json:"pubsub,omitempty"`
	GKE     json.RawMessage `json:"gke,omitempty"` // the GKE simulator's Snapshot
}

type savedIssuer struct {
	Key string `json:"key"` // PEM (devissuer.MarshalKey)
}

// savedPubSub is what the Pub/Sub emulator holds: its whole state
// (psemu.State: each subscription's own backlog, snapshots, schemas,
// policies). A data file of an earlier format has instead the topics and
// subscriptions (protojson) of the stack's project and the messages that
// not every subscription of their topic had acknowledged; it is still
// read.
type savedPubSub struct {
	State         *psemu.State      `json:"state,omitempty"`
	Topics        []json.RawMessage `json:"topics,omitempty"`
	Subscriptions []json.RawMessage `json:"subscriptions,omitempty"`
	Messages      []savedMessage    `json:"messages,omitempty"`
}

type savedMessage struct {
	Topic       string            `json:"topic"`
	Data        []byte            `json:"data"`
	Attributes  map[string]string `json:"attributes,omitempty"`
	OrderingKey string            `json:"orderingKey,omitempty"`
	PublishTime time.Time         `json:"publishTime"`
}

// readData reads the data file: its bytes and what the devstack keeps in
// it, or nil if there is no file yet.
func readData(path string) ([]byte, *savedData, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read data file: %w", err)
	}
	var d savedData
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, nil, fmt.Errorf("data file %s is not a devstack data file (%w); move it away to start empty", path, err)
	}
	if d.Version > dataVersion {
		return nil, nil, fmt.Errorf("data file %s has format version %d, newer than this devstack's %d", path, d.Version, dataVersion)
	}
	return b, &d, nil
}

// saver writes the stack's state to the data file: everything read at one
// instant, written to a temporary file that then replaces the data file,
// so that the file is always a whole state, however the process ends.
type saver struct {
	path string

	mu   sync.Mutex
	docs *fsemu.Snapshot // the Firestore snapshot last written
	enc  []byte          // its encoding
	rest []byte          // the rest of what was last written
}

// save writes the state if anything changed since the last save. The GKE
// simulator is held still while the Firestore documents are read, so the
// two are as of one instant: the reconciler records what it is about to
// ask GKE before asking, so GKE never has what Firestore does not know it
// asked for, and Firestore never knows of an answer GKE did not give. The
// Pub/Sub emulator is read after both: a message whose event left the
// outbox before that instant was published before it, so it is either
// acknowledged or among the messages kept.
func (s *Stack) save(ctx context.Context) error {
	sv := s.saver
	sv.mu.Lock()
	defer sv.mu.Unlock()
	var docs *fsemu.Snapshot
	gke, err := s.GKE.Snapshot(func() {
		docs = sv.docs
		if docs == nil || changed(docs) {
			docs = s.Firestore.Snapshot()
		}
	})
	if err != nil {
		return err
	}
	ps, err := s.pubsubState(ctx)
	if err != nil {
		return err
	}
	var rest bytes.Buffer
	rest.WriteString(`{"version":`)
	rest.WriteString(fmt.Sprint(dataVersion))
	for _, part := range []struct {
		name string
		v    any
	}{{"issuer", s.issuerData}, {"pubsub", ps}, {"gke", json.RawMessage(gke)}} {
		b, err := json.Marshal(part.v)
		if err != nil {
			return fmt.Errorf("save %s: %w", part.name, err)
		}
		fmt.Fprintf(&rest, ",%q:", part.name)
		rest.Write(b)
	}
	if docs == sv.docs && bytes.Equal(rest.Bytes(), sv.rest) {
		return nil
	}
	enc := sv.enc
	if docs != sv.docs {
		if enc, err = docs.MarshalJSON(); err != nil {
			return err
		}
	}
	out := append(slices.Clip(rest.Bytes()), `,"documents":`...)
	out = append(append(out, enc...), "}\n"...)
	if err := writeAtomically(sv.path, out); err != nil {
		return err
	}
	sv.docs, sv.enc, sv.rest = docs, enc, rest.Bytes()
	return nil
}

func changed(sn *fsemu.Snapshot) bool {
	select {
	case <-sn.Changed():
		return true
	default:
		return false
	}
}

// writeAtomically replaces the file at path with data: it writes a
// temporary file beside it, syncs it, and renames it over path, so that
// path holds the old data or the new, never a mix or nothing. The
// temporary file has a fixed name, so that a process killed while writing
// it leaves one behind at most, which the next save overwrites.
func writeAtomically(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("save data: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("save data: %w", err)
	}
	return nil
}

// saveLoop saves every interval until ctx ends.
func (s *Stack) saveLoop(ctx context.Context, interval time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.save(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("Saving the data file failed; the next save retries", "file", s.cfg.DataFile, "error", err)
			}
		}
	}
}

// pubsubState reads the whole state of the Pub/Sub emulator.
func (s *Stack) pubsubState(context.Context) (*savedPubSub, error) {
	st, err := s.PubSub.Save()
	if err != nil {
		return nil, fmt.Errorf("pubsub: %w", err)
	}
	return &savedPubSub{State: st}, nil
}

// restorePubSub puts back the Pub/Sub emulator's state. From a data file
// of the earlier format, it recreates the saved topics and subscriptions,
// then publishes again, oldest first, the messages that were not
// acknowledged; a subscription or message whose topic was deleted is left
// out.
func (s *Stack) restorePubSub(ctx context.Context, ps *savedPubSub) error {
	if ps.State != nil {
		if err := s.PubSub.Restore(ps.State); err != nil {
			return fmt.Errorf("pubsub: %w", err)
		}
		return nil
	}
	g := s.PubSub
	exists := func(err error) bool { return status.Code(err) == codes.AlreadyExists }
	// A subscription whose topic was deleted names "_deleted-topic_",
	// which CreateSubscription refuses as a name.
	noTopic := func(err error) bool {
		return status.Code(err) == codes.NotFound || status.Code(err) == codes.InvalidArgument
	}
	for _, raw := range ps.Topics {
		var t pubsubpb.Topic
		if err := protojson.Unmarshal(raw, &t); err != nil {
			return fmt.Errorf("restore topic: %w", err)
		}
		if _, err := g.CreateTopic(ctx, &t); err != nil && !exists(err) {
			return fmt.Errorf("restore topic %s: %w", t.Name, err)
		}
	}
	for _, raw := range ps.Subscriptions {
		var sub pubsubpb.Subscription
		if err := protojson.Unmarshal(raw, &sub); err != nil {
			return fmt.Errorf("restore subscription: %w", err)
		}
		_, err := g.CreateSubscription(ctx, &sub)
		switch {
		case noTopic(err):
			s.log.Warn("Subscription of a deleted topic left out", "subscription", sub.Name, "topic", sub.Topic)
		case err != nil && !exists(err):
			return fmt.Errorf("restore subscription %s: %w", sub.Name, err)
		}
	}
	msgs := slices.Clone(ps.Messages)
	slices.SortStableFunc(msgs, func(a, b savedMessage) int { return a.PublishTime.Compare(b.PublishTime) })
	for _, m := range msgs {
		if !strings.HasPrefix(m.Topic, "projects/"+s.cfg.Project+"/topics/") {
			continue
		}
		_, err := g.Publish(ctx, &pubsubpb.PublishRequest{Topic: m.Topic, Messages: []*pubsubpb.PubsubMessage{{Data: m.Data, Attributes: m.Attributes, OrderingKey: m.OrderingKey}}})
		if err != nil && !noTopic(err) {
			return fmt.Errorf("publish again a message of %s: %w", m.Topic, err)
		}
	}
	if len(msgs) > 0 {
		s.log.Info("Published again the messages no subscriber had acknowledged", "messages", len(msgs))
	}
	return nil
}
