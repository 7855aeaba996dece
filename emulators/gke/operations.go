package gke

import (
	"context"

	"cloud.google.com/go/container/apiv1/containerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// GetOperation returns a copy of the operation, RUNNING or DONE by the
// injected clock. A lost operation is NOT_FOUND.
func (s *GServer) GetOperation(_ context.Context, req *containerpb.GetOperationRequest) (*containerpb.Operation, error) {
	p, id, err := parseOperation(req.Name, req.ProjectId, req.Zone, req.OperationId)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	op, err := s.operation(p, id)
	if err != nil {
		return nil, err
	}
	return opOut(op), nil
}

// operation finds an operation that is not lost, in p's project and
// location ("-" matches any). Must be called with the lock held.
func (s *GServer) operation(p parentKey, id string) (*operation, error) {
	op := s.ops[id]
	if op == nil || op.lost || op.parent.project != p.project || (p.location != "-" && op.parent.location != p.location) {
		return nil, status.Errorf(codes.NotFound, "Not found: %s/operations/%s.", scope(p.project, p.location), id)
	}
	return op, nil
}

// ListOperations lists the operations (running and done, not lost) of the
// project in one location, or all with "-", oldest first.
func (s *GServer) ListOperations(_ context.Context, req *containerpb.ListOperationsRequest) (*containerpb.ListOperationsResponse, error) {
	p, err := parseParent(req.Parent, req.ProjectId, req.Zone)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settle()
	resp := &containerpb.ListOperationsResponse{}
	for _, op := range s.opList {
		if !op.lost && op.parent.project == p.project && (p.location == "-" || op.parent.location == p.location) {
			resp.Operations = append(resp.Operations, opOut(op))
		}
	}
	return resp, nil
}
