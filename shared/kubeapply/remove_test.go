package kubeapply

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Remove deletes the pool's objects and only those, and says when none is
// left.
func TestRemove(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	const pool = "pool-gpu"
	ours := map[string]string{LabelPool: pool}
	tests := []struct {
		name  string
		setup func(t *testing.T)
		// state of each object after Remove, indexed as refs
		want        [4]state
		wantForeign []string // the kinds of the *ForeignErrors, in order
	}{
		{
			name:  "nothing there",
			setup: func(*testing.T) {},
			want:  [4]state{absent, absent, absent, absent},
		},
		{
			name: "all the pool's",
			setup: func(t *testing.T) {
				if _, err := c.Apply(ctx, validDesired()); err != nil {
					t.Fatal(err)
				}
			},
			want: [4]state{deleting, absent, absent, absent},
		},
		{
			name: "another pool's",
			setup: func(t *testing.T) {
				d := validDesired()
				d.PoolID = "pool-other"
				if _, err := c.Apply(ctx, d); err != nil {
					t.Fatal(err)
				}
			},
			want: [4]state{untouched, untouched, untouched, untouched},
		},
		{
			name: "the pool's objects in a foreign Namespace",
			setup: func(t *testing.T) {
				createNamespace(t, c, nil)
				createServiceAccount(t, c, ours)
				createSecret(t, c, ours, "t0ken")
				createDaemonSet(t, c, ours)
			},
			want: [4]state{untouched, absent, absent, absent},
		},
		{
			name: "a foreign DaemonSet in the pool's Namespace",
			setup: func(t *testing.T) {
				createNamespace(t, c, ours)
				createServiceAccount(t, c, ours)
				createSecret(t, c, ours, "t0ken")
				createDaemonSet(t, c, nil)
			},
			want:        [4]state{untouched, absent, absent, untouched},
			wantForeign: []string{"DaemonSet"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wipe(t, c)
			tt.setup(t)
			before := read(t, c)

			gone, err := c.Remove(ctx, pool)
			var kinds []string
			for _, fe := range foreignErrors(err) {
				kinds = append(kinds, fe.Kind)
			}
			if diff := cmp.Diff(tt.wantForeign, kinds); diff != "" {
				t.Errorf("Remove = %v; foreign objects (-want +got):\n%s", err, diff)
			}
			if tt.wantForeign == nil && err != nil {
				t.Fatalf("Remove = %v", err)
			}
			if want := tt.wantForeign == nil; gone != want {
				t.Errorf("Remove gone = %v, want %v", gone, want)
			}

			after := read(t, c)
			for i, r := range c.refs() {
				var got state
				switch o := after[i]; {
				case o == nil:
					got = absent
				case o.GetDeletionTimestamp() != nil:
					got = deleting
				case mustJSON(t, o) == mustJSON(t, before[i]):
					got = untouched
				default:
					got = changed
				}
				if got != tt.want[i] {
					t.Errorf("%s after Remove: %s, want %s", r, got, tt.want[i])
				}
			}

			// Remove is safe to run twice; a Namespace left Terminating
			// (no namespace controller here) counts as gone.
			if gone {
				if gone, err := c.Remove(ctx, pool); !gone || err != nil {
					t.Errorf("Remove again = %v, %v; want gone", gone, err)
				}
			}
		})
	}
}

// The pool's Namespace being deleted makes Apply wait: it says so
// distinctly, without a write.
func TestApplyWhileTerminating(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	d := validDesired()
	if _, err := c.Apply(ctx, d); err != nil {
		t.Fatal(err)
	}
	if gone, err := c.Remove(ctx, d.PoolID); !gone || err != nil {
		t.Fatalf("Remove = %v, %v; want gone", gone, err)
	}
	before := read(t, c)
	if _, err := c.Apply(ctx, d); !errors.Is(err, ErrTerminating) {
		t.Errorf("Apply while the Namespace is Terminating = %v, want ErrTerminating", err)
	}
	if diff := cmp.Diff(mustJSON(t, before), mustJSON(t, read(t, c))); diff != "" {
		t.Errorf("objects after Apply refused (-before +after):\n%s", diff)
	}
}

type state int

const (
	absent state = iota
	deleting
	untouched
	changed
)

func (s state) String() string {
	return [...]string{"absent", "being deleted", "untouched", "changed"}[s]
}

// A pool whose ID is not a label value is served by its derived value:
// Apply and Remove find its objects by it, and a pool whose ID happens to
// be that value (another pool) is told apart by the annotation: its Apply
// is refused and its Remove leaves the objects alone.
func TestApplyRemoveOddPoolID(t *testing.T) {
	c, _ := testCluster(t)
	ctx := t.Context()
	const pool = "team:x"
	twin := PoolLabel(pool) // a valid pool ID, its own label value
	if PoolLabel(twin) != twin || twin == pool {
		t.Fatalf("PoolLabel(%q) = %q: want a label value that is its own", pool, twin)
	}
	d := validDesired()
	d.PoolID = pool
	if _, err := c.Apply(ctx, d); err != nil {
		t.Fatalf("Apply for %q = %v", pool, err)
	}
	if held, err := c.Check(ctx, d); !held || err != nil {
		t.Errorf("Check after Apply = %v, %v; want held", held, err)
	}
	for i, o := range read(t, c) {
		if o.GetLabels()[LabelPool] != twin || o.GetAnnotations()[AnnotationPoolID] != pool {
			t.Errorf("%s: label %q annotation %q, want %q, %q", c.refs()[i], o.GetLabels()[LabelPool], o.GetAnnotations()[AnnotationPoolID], twin, pool)
		}
	}

	other := validDesired()
	other.PoolID = twin
	_, err := c.Apply(ctx, other)
	fes := foreignErrors(err)
	if len(fes) != 4 || fes[0].Found != pool {
		t.Errorf("Apply for %q over %q's objects = %v, want 4 foreign objects naming %q", twin, pool, err, pool)
	}
	if held, err := c.Check(ctx, other); held || err != nil {
		t.Errorf("Check for %q = %v, %v; want not held", twin, held, err)
	}
	before := read(t, c)
	if _, err := c.Remove(ctx, twin); err != nil {
		t.Errorf("Remove for %q = %v", twin, err)
	}
	if diff := cmp.Diff(mustJSON(t, before), mustJSON(t, read(t, c))); diff != "" {
		t.Errorf("Remove for %q changed %q's objects (-before +after):\n%s", twin, pool, diff)
	}

	if gone, err := c.Remove(ctx, pool); !gone || err != nil {
		t.Errorf("Remove for %q = %v, %v; want gone", pool, gone, err)
	}
	for i, o := range read(t, c) {
		if o != nil && o.GetDeletionTimestamp() == nil {
			t.Errorf("%s left after Remove", c.refs()[i])
		}
	}
}
