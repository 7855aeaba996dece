package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"

	"github.com/better-compute/kubernetes/shared/store"
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
	// Of is the page of the task's subject (a cluster or a substrate),
	// and Subject its ID.
	Of, Subject string
}

type opRow struct {
	Name, Type, Status, Target, Error string
	Start, End                        string
	Duration                          time.Duration
	Running                           bool
	// Cluster is the page of the operation's cluster, when the fleet has
	// it, and ClusterName its name.
	Cluster, ClusterName string
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
					tr.Of, tr.Subject = subjectOf(h.GetBody())
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
		byProvider := c.clustersByProviderName()
		for _, op := range c.opt.Operations() {
			o := opRow{Name: op.GetName(), Type: op.GetOperationType().String(), Status: op.GetStatus().String(), Target: resourceName(op.GetTargetLink()),
				Start: op.GetStartTime(), End: op.GetEndTime(), Running: op.GetEndTime() == ""}
			if e := op.GetError(); e != nil {
				o.Error = e.GetMessage()
			}
			if l := op.GetTargetLink(); strings.Contains(l, "/clusters/") {
				name := l[strings.Index(l, "/clusters/")+len("/clusters/"):]
				name, _, _ = strings.Cut(name, "/")
				if cl, ok := byProvider[name]; ok {
					o.Cluster, o.ClusterName = clusterPath(cl.Tenant, cl.ID), cl.Name
				}
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

// subjectOf is the page of the subject a reconcile task's body names
// ({"kind", "tenantId", "id"}), and its ID; "" when it names none.
func subjectOf(body []byte) (string, string) {
	var p struct {
		Kind     string `json:"kind"`
		TenantID string `json:"tenantId"`
		ID       string `json:"id"`
	}
	if json.Unmarshal(body, &p) != nil || p.TenantID == "" || p.ID == "" {
		return "", ""
	}
	switch p.Kind {
	case store.ClustersKind:
		return clusterPath(p.TenantID, p.ID), p.ID
	case store.SubstratesKind:
		return Path + "/substrates/" + url.PathEscape(p.TenantID) + "/" + url.PathEscape(p.ID), p.ID
	}
	return "", ""
}

// clustersByProviderName are the fleet's clusters by their provider
// names, once the console's listeners hold the fleet (none before: it
// starts them).
func (c *Console) clustersByProviderName() map[string]ClusterRow {
	out := map[string]ClusterRow{}
	c.watch.start(c.bg, &c.wg)
	if !c.watch.isReady() {
		return out
	}
	f, _, _ := c.watch.fleet()
	for _, cl := range f.Clusters {
		if cl.ProviderName != "" {
			out[cl.ProviderName] = cl
		}
	}
	return out
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
	// Missing: the document has no fields, only subcollections.
	Missing bool
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

// firestorePage browses the Firestore emulator as the Firebase console
// does: any path, whatever it holds. It is a view of the emulator, not
// of the product's documents, so it alone reads with the raw client
// (Options.Firestore) rather than through the store, and spells no
// collection of its own: the paths are the user's.
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
		v.Docs, v.More, err = listDocs(ctx, fsc, fsc.Collection(p))
	default:
		ref := fsc.Doc(p)
		snap, e := ref.Get(ctx)
		d := docView{ID: ref.ID, Path: p, Missing: true}
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

// listDocs is the first firestoreLimit documents of a collection, and
// whether there are more: as Firebase's emulator shows them, those that
// hold only subcollections too (tenants/acme holds no field).
func listDocs(ctx context.Context, fsc *firestore.Client, coll *firestore.CollectionRef) ([]docView, bool, error) {
	var refs []*firestore.DocumentRef
	more := false
	it := coll.DocumentRefs(ctx)
	for {
		ref, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if len(refs) == firestoreLimit {
			more = true
			break
		}
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		return nil, false, nil
	}
	snaps, err := fsc.GetAll(ctx, refs)
	if err != nil {
		return nil, false, err
	}
	var out []docView
	for i, s := range snaps {
		if s == nil || !s.Exists() {
			out = append(out, docView{ID: refs[i].ID, Path: docPath(refs[i].Path), Missing: true})
			continue
		}
		out = append(out, docOf(s))
	}
	return out, more, nil
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
	return docView{ID: s.Ref.ID, Path: docPath(s.Ref.Path), JSON: string(b)}
}

// docPath is a document's path under the database's documents.
func docPath(name string) string {
	return name[strings.Index(name, "/documents/")+len("/documents/"):]
}

// resourceName is a provider link's resource name (projects/...), without
// the API's host.
func resourceName(link string) string {
	if i := strings.Index(link, "/projects/"); i >= 0 {
		return link[i+1:]
	}
	return link
}
