package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
)

type taskRow struct {
	Name, URL      string
	Schedule       time.Time
	Dispatches     int32
	Responses      int32
	LastStatus     string
	DueIn          time.Duration
	LastAttempt    time.Time
	Queue          string
	ShortQueueName string
}

type opRow struct {
	Name, Type, Status, Target, Error string
	Start, End                        string
	Duration                          time.Duration
	Running                           bool
}

type emulatorsView struct {
	Queues     []queueView
	Ops        []opRow
	Running    int
	Kubernetes *Kubernetes
	Instances  []Instance
	HasTasks   bool
	HasOps     bool
	HasInst    bool
}

type queueView struct {
	Name  string
	Tasks []taskRow
}

func (c *Console) emulatorsPage(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	v := emulatorsView{HasTasks: c.opt.Queues != nil, HasOps: c.opt.Operations != nil, HasInst: c.opt.Instances != nil}
	if c.opt.Queues != nil {
		for _, q := range c.opt.Queues() {
			qv := queueView{Name: q.Name}
			for _, t := range q.Tasks {
				tr := taskRow{Name: t.GetName()[strings.LastIndex(t.GetName(), "/")+1:], Dispatches: t.GetDispatchCount(), Responses: t.GetResponseCount()}
				if h := t.GetHttpRequest(); h != nil {
					tr.URL = h.GetUrl()
				}
				if st := t.GetScheduleTime(); st != nil {
					tr.Schedule = st.AsTime()
					tr.DueIn = tr.Schedule.Sub(now).Round(time.Millisecond)
				}
				if a := t.GetLastAttempt(); a != nil {
					tr.LastStatus = a.GetResponseStatus().GetMessage()
					if d := a.GetDispatchTime(); d != nil {
						tr.LastAttempt = d.AsTime()
					}
				}
				qv.Tasks = append(qv.Tasks, tr)
			}
			slices.SortFunc(qv.Tasks, func(a, b taskRow) int { return a.Schedule.Compare(b.Schedule) })
			v.Queues = append(v.Queues, qv)
		}
	}
	if c.opt.Operations != nil {
		for _, op := range c.opt.Operations() {
			o := opRow{Name: op.GetName(), Type: op.GetOperationType().String(), Status: op.GetStatus().String(), Target: resourceName(op.GetTargetLink()),
				Start: op.GetStartTime(), End: op.GetEndTime(), Running: op.GetEndTime() == ""}
			if e := op.GetError(); e != nil {
				o.Error = e.GetMessage()
			}
			if s, err := time.Parse(time.RFC3339Nano, o.Start); err == nil {
				end, err := time.Parse(time.RFC3339Nano, o.End)
				if err != nil {
					end = now
				}
				o.Duration = end.Sub(s).Round(time.Millisecond)
			}
			if o.Running {
				v.Running++
			}
			v.Ops = append(v.Ops, o)
		}
		slices.Reverse(v.Ops)
		if len(v.Ops) > 500 {
			v.Ops = v.Ops[:500]
		}
	}
	if c.opt.Instances != nil {
		v.Instances = c.opt.Instances()
	}
	if c.opt.Kubernetes != nil {
		v.Kubernetes = c.opt.Kubernetes()
	}
	c.render(w, "emulators", page{Title: "What the emulators hold", Nav: "emulators", Body: v})
}

// firestoreView is a collection's documents, or a document, read-only.
type firestoreView struct {
	Path        string
	Crumbs      []crumb
	Collections []string // under Path (a document) or at the root
	Docs        []docView
	Doc         *docView
	More        bool
	Error       string
}

type crumb struct{ Name, Path string }

type docView struct {
	ID, Path string
	JSON     string
}

const firestoreLimit = 100

// checkDocPath says why the segments of a Firestore path name no
// collection or document (an empty segment, . or ..), or nil.
func checkDocPath(segs []string) error {
	for i, s := range segs {
		if s == "" || s == "." || s == ".." || len(s) > 1500 {
			return fmt.Errorf("path segment %d (%q) is not a collection or document ID: IDs are not empty, not . or .., and at most 1,500 bytes", i+1, s)
		}
	}
	return nil
}

func (c *Console) firestorePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p := strings.Trim(r.URL.Query().Get("path"), "/")
	v := firestoreView{Path: p}
	segs := []string{}
	if p != "" {
		segs = strings.Split(p, "/")
	}
	if err := checkDocPath(segs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for i := range segs {
		v.Crumbs = append(v.Crumbs, crumb{Name: segs[i], Path: strings.Join(segs[:i+1], "/")})
	}
	fsc := c.opt.Firestore
	var err error
	switch {
	case len(segs) == 0:
		v.Collections, err = collectionIDs(ctx, fsc.Collections(ctx))
	case len(segs)%2 == 1:
		it := fsc.Collection(p).Limit(firestoreLimit + 1).Documents(ctx)
		snaps, e := it.GetAll()
		err = e
		if len(snaps) > firestoreLimit {
			snaps, v.More = snaps[:firestoreLimit], true
		}
		for _, s := range snaps {
			v.Docs = append(v.Docs, docOf(s))
		}
	default:
		ref := fsc.Doc(p)
		snap, e := ref.Get(ctx)
		d := docView{ID: ref.ID, Path: p}
		if e == nil {
			d = docOf(snap)
		}
		v.Collections, err = collectionIDs(ctx, ref.Collections(ctx))
		v.Doc = &d
	}
	if err != nil {
		v.Error = err.Error()
	}
	c.render(w, "firestore", page{Title: "Firestore documents", Nav: "firestore", Body: v})
}

func collectionIDs(ctx context.Context, it *firestore.CollectionIterator) ([]string, error) {
	refs, err := it.GetAll()
	var out []string
	for _, r := range refs {
		out = append(out, r.Path[strings.Index(r.Path, "/documents/")+len("/documents/"):])
	}
	slices.Sort(out)
	return out, err
}

func docOf(s *firestore.DocumentSnapshot) docView {
	b, _ := json.MarshalIndent(s.Data(), "", "  ")
	p := s.Ref.Path[strings.Index(s.Ref.Path, "/documents/")+len("/documents/"):]
	return docView{ID: s.Ref.ID, Path: p, JSON: string(b)}
}

// resourceName is a provider link's resource name (projects/...), without
// the API's host.
func resourceName(link string) string {
	if i := strings.Index(link, "/projects/"); i >= 0 {
		return link[i+1:]
	}
	return link
}
