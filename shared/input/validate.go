package input

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/go-playground/validator/v10"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/better-compute/kubernetes/shared/errs"
)

// MaxFieldErrors bounds the field errors of one rejection, so a 1 MiB body of
// mistakes does not become a 10 MiB answer.
const MaxFieldErrors = 100

// report collects the broken fields of one request.
type report struct {
	fields   []errs.FieldError
	dropped  int
	reported map[string]bool // paths with an error
	broken   map[string]bool // paths whose JSON was unusable: nothing below them is checked
}

func newReport() *report {
	return &report{reported: map[string]bool{}, broken: map[string]bool{}}
}

// add reports the field at path unless it lies under a broken path: a field
// that was not a string has no pattern to miss.
func (r *report) add(path, reason string) {
	if r.under(path) {
		return
	}
	r.reported[path] = true
	if len(r.fields) >= MaxFieldErrors {
		r.dropped++
		return
	}
	r.fields = append(r.fields, errs.FieldError{Field: path, Reason: reason})
}

// reword gives the field at path the reason to instead of from: for a
// field whose rule where it stands is narrower than its type's.
func (r *report) reword(path, from, to string) {
	for i := range r.fields {
		if r.fields[i].Field == path && r.fields[i].Reason == from {
			r.fields[i].Reason = to
		}
	}
}

// broke reports a field whose JSON could not be used and silences the
// checks of its typed value.
func (r *report) broke(path, reason string) {
	r.add(path, reason)
	r.broken[path] = true
}

// under reports whether path or one of its ancestors is broken.
func (r *report) under(path string) bool {
	if len(r.broken) == 0 {
		return false
	}
	for i := 0; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && r.broken[path[:i]] {
			return true
		}
	}
	return r.broken[path]
}

// ok reports whether nothing is wrong with the field at path, so a check
// across fields may use its value.
func (r *report) ok(path string) bool { return !r.reported[path] && !r.under(path) }

// err is the INVALID_INPUT error listing every broken field, or nil.
func (r *report) err() error {
	if len(r.fields) == 0 {
		return nil
	}
	e := errs.InvalidFields(r.fields)
	if r.dropped > 0 {
		e.Message = fmt.Sprintf("invalid input: %d more fields are invalid, not listed", r.dropped)
	}
	return e
}

// pattern is a string format of the seed, with the reason given when a value
// does not match.
type pattern struct {
	re     *regexp.Regexp
	reason string
}

const crockford = "lowercase Crockford base32 characters (0-9 and a-z without i, l, o, u)"

// patterns are the string formats, by validator tag.
var patterns = map[string]pattern{
	"token": {regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`),
		"must be 1 to 128 letters, digits, '.', '_', ':' or '-'"},
	"clusterid": {regexp.MustCompile(`^kcl_[0-9a-hjkmnp-tv-z]{26,52}$`),
		"must be a cluster ID: kcl_ followed by 26 to 52 " + crockford},
	"substrateid": {regexp.MustCompile(`^ksb_[0-9a-hjkmnp-tv-z]{26,52}$`),
		"must be a substrate ID: ksb_ followed by 26 to 52 " + crockford},
	// A Node's name is a DNS subdomain (RFC 1123), as Kubernetes requires.
	"nodename": {regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`),
		"must be a Kubernetes Node name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"},
	"nodepoolid": {regexp.MustCompile(`^knp_[0-9a-hjkmnp-tv-z]{26,52}$`),
		"must be a node pool ID: knp_ followed by 26 to 52 " + crockford},
	"name": {regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`),
		"must be 1 to 40 lowercase letters, digits or '-', starting with a letter and not ending with '-'"},
	"machinetype": {regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,62}$`),
		"must be 1 to 63 lowercase letters, digits, '.' or '-', starting with a letter or digit (e2-standard-4)"},
	"disktype": {regexp.MustCompile(`^[a-z][a-z0-9-]{1,40}$`),
		"must be 2 to 41 lowercase letters, digits or '-', starting with a letter (pd-balanced)"},
	"acceleratortype": {regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`),
		"must be 1 to 63 lowercase letters, digits or '-', starting with a letter or digit (nvidia-l4)"},
	// Regions and zones are checked against the account's later; here they
	// only need to look like names, including those of providers other than
	// GCP (fra, fra-1), whose clusters are refused as UNSUPPORTED, not as
	// INVALID_INPUT.
	"region": {regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`),
		"must be a region name: 1 to 63 lowercase letters, digits or '-', starting with a letter and not ending with '-' (us-central1)"},
	"zone": {regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`),
		"must be a zone name: 1 to 63 lowercase letters, digits or '-', starting with a letter and not ending with '-' (us-central1-a)"},
}

// validate checks the constraints of the seed's tables that concern one
// field; checks across fields and Kubernetes' label rules are hand-written.
// A *validator.Validate is safe for concurrent use.
var validate = newValidator()

func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	for tag, p := range patterns {
		re := p.re
		must(v.RegisterValidation(tag, func(fl validator.FieldLevel) bool {
			return fl.Field().Kind() == reflect.String && re.MatchString(fl.Field().String())
		}))
	}
	must(v.RegisterValidation("between", func(fl validator.FieldLevel) bool {
		lo, hi := bounds(fl.Param())
		switch fl.Field().Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n := fl.Field().Int()
			return lo <= n && n <= hi
		}
		return false
	}))
	return v
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("input: register validation: %v", err))
	}
}

// bounds parses the param of the between tag, "lo:hi".
func bounds(param string) (lo, hi int64) {
	a, b, ok := strings.Cut(param, ":")
	lo, err1 := strconv.ParseInt(a, 10, 64)
	hi, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		panic(fmt.Sprintf("input: bad between param %q", param))
	}
	return lo, hi
}

// check runs the validator tags of the struct v, reporting each broken field
// under path ("nodePools[1]" or "" for the body itself).
func (r *report) check(path string, v any) {
	err := validate.Struct(v)
	if err == nil {
		return
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		// Only a nil or non-struct argument gets here, and every caller
		// passes a pointer to one of this package's structs.
		panic(fmt.Sprintf("input: validate %T: %v", v, err))
	}
	for _, fe := range ves {
		// The namespace starts with the struct's Go type name.
		_, sub, _ := strings.Cut(fe.Namespace(), ".")
		r.add(joinPath(path, sub), reason(fe))
	}
}

func joinPath(path, sub string) string {
	if path == "" {
		return sub
	}
	return path + "." + sub
}

// reason says in English why the value broke the tag.
func reason(fe validator.FieldError) string {
	if p, ok := patterns[fe.Tag()]; ok {
		return p.reason
	}
	switch fe.Tag() {
	case "between":
		lo, hi := bounds(fe.Param())
		return fmt.Sprintf("must be between %d and %d", lo, hi)
	case "oneof":
		return "must be one of " + strings.Join(strings.Fields(fe.Param()), ", ")
	case "max":
		switch fe.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			return "must have at most " + fe.Param() + " items"
		}
		return "must be at most " + fe.Param() + " characters"
	}
	return "is invalid (" + fe.Tag() + ")"
}

// MaxLabels is the number of labels a node pool or a cluster may have (the
// seed's limit for node pools, kept for clusters).
const MaxLabels = 32

// reservedLabelDomains are the label key prefixes Kubernetes keeps for
// itself: a kubelet refuses node labels under them, so a pool carrying one
// would never get its nodes, and GKE refuses them in a node pool.
var reservedLabelDomains = []string{"kubernetes.io", "k8s.io"}

// gkeLabelDomain is the label key prefix GKE keeps for itself on nodes
// (cloud.google.com/gke-nodepool, cloud.google.com/compute-class, ...): GKE
// refuses a node pool that sets one, and a label GKE puts on nodes must
// never be the tenant's to say (the substrates tell their node pools'
// nodes by one). A subdomain of it is refused too: GKE's documents name no
// key under one that a tenant may set.
const gkeLabelDomain = "cloud.google.com"

// checkLabels applies Kubernetes' rules to the keys and values of labels at
// path, and refuses the keys GKE or Kubernetes manage, as GKE does for
// node labels (with its words); in key order so the report is the same
// every time. A cluster's labels, which stay on Better Compute's resource,
// follow the same rules as its pools', so that a label means one thing.
func (r *report) checkLabels(path string, labels map[string]string) {
	if len(labels) > MaxLabels {
		r.add(path, fmt.Sprintf("must have at most %d labels", MaxLabels))
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := mapPath(path, k)
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			r.add(p, "key "+strings.Join(msgs, "; "))
		} else if d := reservedDomain(k, reservedLabelDomains...); d != "" {
			r.add(p, fmt.Sprintf(`key prefix %s is managed by Kubernetes: labels under kubernetes.io/ and k8s.io/ (and their subdomains) cannot be set (GKE: "Applying kubernetes label is not allowed: %s.")`, d, k))
		} else if d := reservedDomain(k, gkeLabelDomain); d != "" {
			r.add(p, fmt.Sprintf(`key prefix %s is managed by GKE: labels under cloud.google.com/ (and its subdomains) cannot be set (GKE: "Node labels with key %q are managed by GKE or Kubernetes and must not be manually specified.")`, d, k))
		}
		if msgs := content.IsLabelValue(labels[k]); len(msgs) > 0 {
			r.add(p, "value "+strings.Join(msgs, "; "))
		}
	}
}

// reservedDomain is key's prefix when it is one of domains or a subdomain
// of one, "" otherwise.
func reservedDomain(key string, domains ...string) string {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return ""
	}
	for _, d := range domains {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return prefix
		}
	}
	return ""
}

// checkTaints applies Kubernetes' rules to taint keys and values: a key is a
// qualified name, a value follows label values, and no two taints share a
// key and an effect.
func (r *report) checkTaints(path string, taints []taint) {
	type keyEffect struct{ key, effect string }
	seen := map[keyEffect]int{}
	for i, t := range taints {
		p := indexPath(path, i)
		if msgs := content.IsLabelKey(t.Key); len(msgs) > 0 {
			r.add(p+".key", strings.Join(msgs, "; "))
		}
		if msgs := content.IsLabelValue(t.Value); len(msgs) > 0 {
			r.add(p+".value", strings.Join(msgs, "; "))
		}
		if !r.ok(p+".key") || !r.ok(p+".effect") {
			continue
		}
		ke := keyEffect{t.Key, t.Effect}
		if j, dup := seen[ke]; dup {
			r.add(p, fmt.Sprintf("duplicates %s: two taints with the same key and effect", indexPath(path, j)))
			continue
		}
		seen[ke] = i
	}
}

// checkUnique reports every element of list at path equal to an earlier one.
func (r *report) checkUnique(path string, list []string) {
	seen := make(map[string]int, len(list))
	for i, s := range list {
		p := indexPath(path, i)
		if !r.ok(p) {
			continue
		}
		if j, dup := seen[s]; dup {
			r.add(p, "duplicates "+indexPath(path, j))
			continue
		}
		seen[s] = i
	}
}
