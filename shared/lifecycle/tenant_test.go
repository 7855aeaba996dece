package lifecycle

import (
	"errors"
	"testing"

	"github.com/better-compute/kubernetes/shared/errs"
	"github.com/better-compute/kubernetes/shared/model"
)

func TestAddCluster(t *testing.T) {
	quota := func(n int) model.Quota { return model.Quota{Clusters: &n} }
	tests := []struct {
		name   string
		tenant model.Tenant
		want   errs.Kind // 0: accepted
	}{
		{name: "no quota", tenant: model.Tenant{ClustersCreated: 500, ClustersDeleted: 2}},
		{name: "under the quota", tenant: model.Tenant{Quota: quota(5), ClustersCreated: 6, ClustersDeleted: 2}},
		{name: "at the quota", tenant: model.Tenant{Quota: quota(5), ClustersCreated: 7, ClustersDeleted: 2}, want: errs.Quota},
		{name: "over a quota lowered", tenant: model.Tenant{Quota: quota(5), ClustersCreated: 9, ClustersDeleted: 2}, want: errs.Quota},
		{name: "a quota of none", tenant: model.Tenant{Quota: quota(0)}, want: errs.Quota},
		{name: "a place freed", tenant: model.Tenant{Quota: quota(5), ClustersCreated: 7, ClustersDeleted: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := tt.tenant
			err := AddCluster("acme", &tn)
			var de *errs.Error
			switch {
			case tt.want == 0 && err != nil:
				t.Fatalf("AddCluster = %v, want accepted", err)
			case tt.want != 0 && (!errors.As(err, &de) || de.Kind != tt.want):
				t.Fatalf("AddCluster = %v, want %s", err, tt.want.Code())
			case tt.want != 0:
				if tn != tt.tenant {
					t.Errorf("tenant after a refusal = %+v, want %+v", tn, tt.tenant)
				}
				return
			}
			if got, want := ActiveClusters(&tn), ActiveClusters(&tt.tenant)+1; got != want {
				t.Errorf("ActiveClusters after = %d, want %d", got, want)
			}
		})
	}
}
