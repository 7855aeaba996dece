package poolevents

import (
	"context"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	fsemu "github.com/better-compute/kubernetes/emulators/firestore"
	"github.com/better-compute/kubernetes/shared/event"
	"github.com/better-compute/kubernetes/shared/lifecycle"
	"github.com/better-compute/kubernetes/shared/store"
)

// TestConsumeLostCommit loses the answer of the commit that records a
// pool's event, after Firestore stored it: the event is acknowledged
// with its substrate's chain kicked, as when nothing goes wrong, not
// redelivered into "not newer than the version applied" with no kick, nor
// dropped as unstorable.
func TestConsumeLostCommit(t *testing.T) {
	for _, code := range []codes.Code{codes.Unavailable, codes.DeadlineExceeded} {
		t.Run(code.String(), func(t *testing.T) {
			ctx := context.Background()
			srv, err := fsemu.NewServer()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), store.DialOption())
			if err != nil {
				t.Fatal(err)
			}
			fs, err := firestore.NewClient(ctx, "consume", option.WithGRPCConn(conn))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			st, err := store.New(fs, lifecycle.Rules{})
			if err != nil {
				t.Fatal(err)
			}
			err = st.LoadSeed(ctx, &store.Seed{Accounts: []store.Account{
				{ID: "acc-gcp", Provider: "gcp", Project: "p", Regions: map[string][]string{"us-central1": {"us-central1-a"}}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			k := &kicks{}
			c, err := NewConsumer(st, k)
			if err != nil {
				t.Fatal(err)
			}
			srv.LoseNext("Commit", 1, code, "answer lost")
			err = c.Handle(ctx, event.PoolUpdated, pool(1, "acc-gcp", "us-central1", 1))
			if n := srv.Lost("Commit"); n != 1 {
				t.Fatalf("answers lost = %d, want 1", n)
			}
			if err != nil {
				t.Fatalf("Handle = %v, want the event applied", err)
			}
			subs := substratesOf(t, fs)
			if len(subs) != 1 || len(k.list) != 1 || k.list[0].ID != subs[0].ID {
				t.Errorf("substrates %+v, kicks %v; want one substrate, its chain kicked", subs, k.list)
			}
		})
	}
}
