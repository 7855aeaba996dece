package firestore

import (
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// docName is a parsed document resource name.
type docName struct {
	db   string // projects/P/databases/D
	path string // col/doc[/col/doc...]
}

func (n docName) String() string { return n.db + "/documents/" + n.path }

// parseDatabase checks a name of the form projects/P/databases/D.
func parseDatabase(name string) (string, error) {
	segs := strings.Split(name, "/")
	if len(segs) != 4 || segs[0] != "projects" || segs[2] != "databases" || !validID(segs[1]) || !validID(segs[3]) {
		return "", status.Errorf(codes.InvalidArgument, "invalid database name %q: want projects/{project_id}/databases/{database_id}", name)
	}
	return name, nil
}

// parseDocName checks a document name projects/P/databases/D/documents/c/d...
func parseDocName(name string) (docName, error) {
	db, rest, err := splitDocumentsRoot(name)
	if err != nil {
		return docName{}, err
	}
	if rest == "" {
		return docName{}, status.Errorf(codes.InvalidArgument, "%q is not a document name", name)
	}
	segs := strings.Split(rest, "/")
	if len(segs)%2 != 0 {
		return docName{}, status.Errorf(codes.InvalidArgument, "%q is a collection, not a document name", name)
	}
	for _, s := range segs {
		if err := checkID(s, name); err != nil {
			return docName{}, err
		}
	}
	return docName{db: db, path: rest}, nil
}

// parseParent checks a parent name: the documents root of a database or a
// document name. It returns the database and the document path ("" for the
// root).
func parseParent(name string) (db, path string, err error) {
	db, rest, err := splitDocumentsRoot(name)
	if err != nil {
		return "", "", err
	}
	if rest == "" {
		return db, "", nil
	}
	n, err := parseDocName(name)
	if err != nil {
		return "", "", err
	}
	return db, n.path, nil
}

func splitDocumentsRoot(name string) (db, rest string, err error) {
	segs := strings.SplitN(name, "/", 6)
	if len(segs) < 5 || segs[4] != "documents" {
		return "", "", status.Errorf(codes.InvalidArgument, "invalid resource name %q: want projects/{project_id}/databases/{database_id}/documents[/...]", name)
	}
	db, err = parseDatabase(strings.Join(segs[:4], "/"))
	if err != nil {
		return "", "", err
	}
	if len(segs) == 6 {
		rest = segs[5]
		if rest == "" {
			return "", "", status.Errorf(codes.InvalidArgument, "invalid resource name %q: trailing slash", name)
		}
	}
	return db, rest, nil
}

// checkID applies Firestore's rules for document and collection IDs.
func checkID(id, name string) error {
	switch {
	case id == "":
		return status.Errorf(codes.InvalidArgument, "resource name %q has an empty segment", name)
	case id == "." || id == "..":
		return status.Errorf(codes.InvalidArgument, "resource name %q has the invalid ID %q", name, id)
	case len(id) > 1500:
		return status.Errorf(codes.InvalidArgument, "resource name %q has an ID longer than 1500 bytes", name)
	case isReserved(id) && !isNumericID(id):
		return status.Errorf(codes.InvalidArgument, "resource name %q uses the reserved ID %q", name, id)
	}
	return nil
}

// isNumericID reports whether id is of the form __id<n>__ with n an int64,
// the only reserved form Firestore accepts: Datastore's numeric IDs.
func isNumericID(id string) bool {
	_, ok := numericID(id)
	return ok
}

func numericID(id string) (int64, bool) {
	if len(id) <= 6 || !strings.HasPrefix(id, "__id") || !strings.HasSuffix(id, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(id[4:len(id)-2], 10, 64)
	return n, err == nil
}

// compareIDs orders two document or collection IDs as Firestore does:
// numeric IDs first, by value, then the others by their UTF-8 bytes.
func compareIDs(a, b string) int {
	na, aNum := numericID(a)
	nb, bNum := numericID(b)
	switch {
	case aNum && bNum:
		if c := cmpInt64(na, nb); c != 0 {
			return c
		}
		// __id5__ and __id05__ are the same number; keep the order total.
		return strings.Compare(a, b)
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

func validID(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/")
}

// checkSameDB rejects a name of another database than the request's.
func checkSameDB(reqDB, nameDB, name string) error {
	if reqDB != nameDB {
		return status.Errorf(codes.InvalidArgument, "resource %q is not in database %q", name, reqDB)
	}
	return nil
}
