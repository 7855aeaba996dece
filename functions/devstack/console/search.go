package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// searchView is what a search found.
type searchView struct {
	Query      string
	Clusters   []ClusterRow
	Substrates []SubstrateRow
	Error      string
}

// maxFound is how many of each kind a search lists.
const maxFound = 100

// search finds, in the fleet, the clusters whose name, ID or provider
// name, or one of whose node pools' name or ID, holds the query, and the
// substrates whose ID, pool or cluster does (case ignored). One cluster
// or substrate named exactly (its ID, or the only one of the name) is
// shown at once.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	v := searchView{Query: q}
	if q == "" {
		c.render(w, "search", page{Title: "Search", Nav: "search", Body: v})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	f, _, _, err := c.readFleet(ctx)
	if err != nil {
		v.Error = err.Error()
		c.render(w, "search", page{Title: "Search", Nav: "search", Body: v})
		return
	}
	lq := strings.ToLower(q)
	has := func(ss ...string) bool {
		for _, s := range ss {
			if s != "" && strings.Contains(strings.ToLower(s), lq) {
				return true
			}
		}
		return false
	}
	var exact []string
	for _, cl := range f.Clusters {
		match := has(cl.ID, cl.Name, cl.ProviderName, cl.Substrate)
		for _, p := range cl.Pools {
			match = match || has(p.ID, p.Name)
		}
		if !match {
			continue
		}
		if cl.ID == q || cl.Name == q || cl.ProviderName == q {
			exact = append(exact, clusterPath(cl.Tenant, cl.ID))
		}
		if len(v.Clusters) < maxFound {
			v.Clusters = append(v.Clusters, cl)
		}
	}
	for _, s := range f.Substrates {
		if !has(s.ID, s.PoolID, s.ClusterID) {
			continue
		}
		if s.ID == q || s.PoolID == q {
			exact = append(exact, Path+"/substrates/"+url.PathEscape(s.Tenant)+"/"+url.PathEscape(s.ID))
		}
		if len(v.Substrates) < maxFound {
			v.Substrates = append(v.Substrates, s)
		}
	}
	if len(exact) == 1 {
		http.Redirect(w, r, exact[0], http.StatusSeeOther)
		return
	}
	c.render(w, "search", page{Title: "Search: " + q, Nav: "search", Body: v})
}

// clusterPath is a cluster's page.
func clusterPath(tenant, id string) string {
	return Path + "/clusters/" + url.PathEscape(tenant) + "/" + url.PathEscape(id)
}
